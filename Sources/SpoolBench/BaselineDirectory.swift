#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Where saved runs live: `--save-baseline NAME` writes the report as `DIRECTORY/NAME.json`
/// and `--baseline NAME` reads it back to compare with (``Report/compare(with:name:)``).
/// The file is the report's JSON (``Report/json()``), the same as `--json` writes.
///
/// The directory is made 0700 and the files 0600; a file is written beside its final name
/// and renamed over it, so a crash leaves the old baseline or the new one. Blocking: call it
/// off the cooperative pool.
package struct BaselineDirectory: Sendable {
    /// The directory's path.
    package var path: String

    /// The default directory: `.spool-bench` in the current directory.
    package static let defaultPath = ".spool-bench"
    /// The largest baseline file read: 64 MiB (a full run's report is well under 1 MiB).
    package static let maximumFileBytes = 64 << 20

    package init(path: String = BaselineDirectory.defaultPath) {
        self.path = path
    }

    /// Writes `report` as the baseline `name`, replacing one of that name.
    ///
    /// - Throws: ``BenchError`` for a bad name or when the directory or file cannot be written.
    package func save(_ report: Report, as name: String) throws {
        let file = try self.file(name)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let temporary = file + ".tmp"
        let fd = try openFile(temporary, flags: O_CREAT | O_TRUNC | O_WRONLY)
        do {
            try writeAll(fd, Array(try report.json()), path: temporary)
            try check(fsync(fd), "fsync", temporary)
            close(fd)
        } catch {
            close(fd)
            unlink(temporary)
            throw error
        }
        try check(rename(temporary, file), "rename", file)
    }

    /// The baseline `name`.
    ///
    /// - Throws: ``BenchError`` for a bad name, a missing baseline (naming the saved ones),
    ///   a file over ``maximumFileBytes`` or one that is not a report of this version.
    package func load(_ name: String) throws -> Report {
        let file = try self.file(name)
        guard let handle = FileHandle(forReadingAtPath: file) else {
            let saved = ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [])
                .filter { $0.hasSuffix(".json") }.map { String($0.dropLast(5)) }.sorted()
            throw BenchError("no baseline \"\(name)\" in \(path) (saved: \(saved.isEmpty ? "none" : saved.joined(separator: ", ")))")
        }
        defer { try? handle.close() }
        let data = try handle.read(upToCount: Self.maximumFileBytes + 1) ?? Data()
        guard data.count <= Self.maximumFileBytes else {
            throw BenchError("baseline file \(file) is larger than \(Self.maximumFileBytes >> 20) MiB: not a report")
        }
        do {
            return try JSONDecoder().decode(Report.self, from: data)
        } catch {
            throw BenchError("baseline file \(file) is not a `spool bench` report of version 2: \(error)")
        }
    }

    /// The file of baseline `name`, once the name is checked: 1 to 64 letters, digits, `.`,
    /// `_` or `-`, not starting with `.` (so it stays one file inside the directory).
    func file(_ name: String) throws -> String {
        let allowed = name.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "._-".unicodeScalars.contains($0)) }
        guard (1...64).contains(name.count), allowed, !name.hasPrefix(".") else {
            throw BenchError("baseline name \"\(name.prefix(80))\": a name is 1 to 64 letters, digits, '.', '_' or '-', not starting with '.'")
        }
        return path + "/" + name + ".json"
    }
}
