import Foundation
import Testing
@testable import Spool
#if canImport(Glibc)
import Glibc
#endif

/// Something other than a regular file under a name Spool uses (a FIFO, a directory) must make
/// opening fail with an error naming it, not block for ever waiting for a FIFO's writer.
@Suite struct SpecialFileTests {
    func makeLog(_ dir: TemporaryDirectory) throws {
        try withEventLog(directory: dir.path) { log in
            for i in 0..<10 { try log.append(payload(i)) }
            _ = try log.consumer(named: "reader")
        }
    }

    @Test(arguments: ["00000000000000000099.seg", "META", "SYNCED", "consumers/reader.offset"])
    func aFIFOUnderALogFilesNameFailsOpenAndSaysWhich(name: String) throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        try makeLog(dir)
        try? FileManager.default.removeItem(atPath: dir.file(name))
        try #require(mkfifo(dir.file(name), 0o600) == 0)
        for open in [{ try EventLog.open(directory: dir.path).close() }, { try LogSnapshot(directory: dir.path).close() }] as [@Sendable () throws -> Void] {
            let outcome = within(seconds: 30, open)
            #expect(throws: SpoolError.self) { try outcome?.get() }
            if case .failure(let error as SpoolError)? = outcome {
                #expect(error.code == .io && "\(error)".contains(name) && "\(error)".contains("not a regular file"), "\(error)")
            }
        }
    }

    @Test func aDirectoryUnderASegmentsNameFailsOpenAndSaysWhich() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        try makeLog(dir)
        try FileManager.default.createDirectory(atPath: dir.file("00000000000000000099.seg"), withIntermediateDirectories: false)
        #expect { try EventLog.open(directory: dir.path) } throws: { "\($0)".contains("00000000000000000099.seg") && "\($0)".contains("not a regular file") }
    }

    @Test func aFIFONamedLockDoesNotBlockOpening() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        try makeLog(dir)
        try FileManager.default.removeItem(atPath: dir.file(Format.lockFileName))
        try #require(mkfifo(dir.file(Format.lockFileName), 0o600) == 0)
        let read = within(seconds: 30) { () -> Int in
            let snapshot = try LogSnapshot(directory: dir.path)
            defer { snapshot.close() }
            return try records(snapshot.readAll()).count
        }
        #expect(try read?.get() == 10)
        let written = within(seconds: 30) { () -> UInt64 in
            try withEventLog(directory: dir.path) { try $0.appendBlocking(payload(10), durability: .written) }
        }
        #expect(try written?.get() == 10)
    }

    /// A symbolic link under a name the log uses is refused, naming it, and the file it points
    /// to (outside the log) is neither cut nor rewritten nor chmod-ed (issue #21, item 3).
    @Test(arguments: ["00000000000000000099.seg", "META", "SYNCED", "LOCK", "consumers/reader.offset", "consumers"])
    func aSymbolicLinkUnderALogFilesNameIsRefusedAndItsTargetLeftAlone(name: String) throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        try makeLog(dir)
        let outside = TemporaryDirectory("outside")
        defer { outside.cleanup() }
        let victim = outside.file(name == "consumers" ? "victim-dir" : "victim.txt")
        if name == "consumers" {
            try FileManager.default.createDirectory(atPath: victim, withIntermediateDirectories: false)
        } else {
            try #require(FileManager.default.createFile(atPath: victim, contents: Data("precious\n".utf8), attributes: [.posixPermissions: 0o640]))
        }
        try? FileManager.default.removeItem(atPath: dir.file(name))
        try FileManager.default.createSymbolicLink(atPath: dir.file(name), withDestinationPath: victim)

        #expect { try withEventLog(directory: dir.path) { log in
            _ = try log.appendBlocking(payload(10), durability: .synced)
            _ = try log.consumer(named: "other")
        } } throws: { "\($0)".contains(name) && "\($0)".contains("symbolic link") }
        if name == "consumers" {
            #expect(try FileManager.default.contentsOfDirectory(atPath: victim).isEmpty)
        } else {
            #expect(FileManager.default.contents(atPath: victim) == Data("precious\n".utf8))
            let mode = try FileManager.default.attributesOfItem(atPath: victim)[.posixPermissions] as? Int
            #expect(mode == 0o640)
        }
    }
}
