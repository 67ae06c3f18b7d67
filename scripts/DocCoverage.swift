// Fails when a public symbol declared in this package has no documentation comment.
//
// DocC's --warnings-as-errors catches broken links and misnamed parameters, but not a public
// symbol that has no `///` comment at all; this check does, from the symbol graphs that
// `swift package generate-documentation` extracts. A member that implements a protocol
// requirement counts as documented when the requirement is (DocC shows the requirement's
// comment there). Symbols the compiler synthesises (Equatable's `!=`, an actor's
// `assertIsolated`) have no location in the package and are left out.
//
// Usage: swift scripts/DocCoverage.swift FILE.symbols.json...
import Foundation

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
        if symbol["docComment"] != nil { continue }
        let name = (symbol["pathComponents"] as? [String] ?? []).joined(separator: ".")
        let position = location["position"] as? [String: Any]
        let line = (position?["line"] as? Int).map { ":\($0 + 1)" } ?? ""
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
