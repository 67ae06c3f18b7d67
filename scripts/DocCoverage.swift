// Fails when a public symbol declared in this package has no documentation comment.
//
// DocC's --warnings-as-errors catches broken links and misnamed parameters, but not a public
// symbol that has no `///` comment at all; this check does, from the symbol graphs that
// `swift package generate-documentation` extracts. The comment must be the symbol's own, at its
// declaration: a member that implements a protocol requirement inherits the requirement's
// comment in the graph, but DocC shows none for a requirement of another module (a
// `description` would read "A textual representation of this instance", or nothing), and the
// member's contract is its own. Symbols the compiler synthesises (Equatable's `!=`, an actor's
// `assertIsolated`) have no location in the package and are left out.
//
// Usage: swift scripts/DocCoverage.swift FILE.symbols.json...
import Foundation

/// The lines of the source file at `uri`, read once.
var sourceLines: [String: [Substring]] = [:]
func lines(of uri: String) -> [Substring] {
    if let lines = sourceLines[uri] { return lines }
    let text = (try? String(contentsOf: URL(string: uri)!, encoding: .utf8)) ?? ""
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    sourceLines[uri] = lines
    return lines
}

/// Whether `comment` (a symbol graph's `docComment`) was written at the declaration on line
/// `declaration` (0-based) of the file at `uri`: in that file, and with nothing but attributes
/// between its last line and the declaration. An inherited comment names the requirement's
/// file (or none, from another module), or lies elsewhere in the same file.
func isOwn(_ comment: [String: Any]?, uri: String, declaration: Int) -> Bool {
    guard let comment, comment["uri"] as? String == uri,
          let last = (comment["lines"] as? [[String: Any]])?.last,
          let range = last["range"] as? [String: Any], let start = range["start"] as? [String: Any],
          let end = start["line"] as? Int, end < declaration else { return false }
    let source = lines(of: uri)
    guard declaration <= source.count else { return false }
    return source[(end + 1)..<declaration].allSatisfy { $0.trimmingCharacters(in: .whitespaces).hasPrefix("@") }
}

var undocumented: [String] = []
var checked = 0
for path in CommandLine.arguments.dropFirst() {
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    guard let graph = try JSONSerialization.jsonObject(with: data) as? [String: Any],
          let symbols = graph["symbols"] as? [[String: Any]] else {
        FileHandle.standardError.write(Data("\(path): not a symbol graph\n".utf8))
        exit(2)
    }
    for symbol in symbols {
        guard let access = symbol["accessLevel"] as? String, access == "public" || access == "open",
              let location = symbol["location"] as? [String: Any], let uri = location["uri"] as? String,
              let sources = uri.range(of: "/Sources/") else { continue }
        checked += 1
        let name = (symbol["pathComponents"] as? [String] ?? []).joined(separator: ".")
        let declaration = (location["position"] as? [String: Any])?["line"] as? Int
        if let declaration, isOwn(symbol["docComment"] as? [String: Any], uri: uri, declaration: declaration) { continue }
        let line = declaration.map { ":\($0 + 1)" } ?? ""
        undocumented.append("Sources/\(uri[sources.upperBound...])\(line): \(name) has no documentation comment")
    }
}
guard checked > 0 else {
    FileHandle.standardError.write(Data("no public symbol found in \(CommandLine.arguments.dropFirst())\n".utf8))
    exit(2)
}
for line in undocumented.sorted() { print(line) }
print("\(checked - undocumented.count) of \(checked) public symbols documented")
exit(undocumented.isEmpty ? 0 : 1)
