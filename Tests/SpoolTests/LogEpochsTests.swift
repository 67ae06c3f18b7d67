import Foundation
import Testing
@testable import Spool

/// A copy of a log's directory opened for writing starts an epoch: its next records go out
/// under a new id, the records it shares with its original keep theirs (issue #53, "the log
/// side"; FORMAT.md §13).
@Suite struct LogEpochsTests {
    /// A log of `count` records in `dir`, closed; returns its id.
    private func makeLog(_ dir: String, count: Int) throws -> LogID {
        try withEventLog(directory: dir) { log in
            for i in 0..<count { try log.append(payload(i)) }
            return log.id
        }
    }

    @Test func aLogOpenedWhereItWasMadeHasNoEpochAndSaysWhereItIs() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let id = try makeLog(dir.path, count: 5)
        let text = try String(contentsOfFile: dir.path + "/EPOCHS", encoding: .utf8)
        var info = stat()
        #expect(stat(dir.path, &info) == 0)
        #expect(text.hasPrefix("spool epochs 1\nplace \(info.st_ino) "), "\(text)")
        #expect(text.split(separator: "\n").count == 2, "no epoch line: \(text)")
        let attributes = try FileManager.default.attributesOfItem(atPath: dir.path + "/EPOCHS")
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        try withEventLog(directory: dir.path) { log in
            #expect(log.epochs == LogEpochs(base: id))
            #expect(log.recoveryReport.ignoredFiles.isEmpty, "EPOCHS is the log's own file")
        }
    }

    @Test func aCopiedDirectoryStartsAnEpochAtItsNextSeqAndItsOriginalDoesNot() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let original = dir.path + "/original", copy = dir.path + "/copy"
        let id = try makeLog(original, count: 7)
        try FileManager.default.copyItem(atPath: original, toPath: copy)

        let epochs = try withEventLog(directory: copy) { log -> LogEpochs in
            try log.append(payload(100))
            return log.epochs
        }
        #expect(epochs.base == id && epochs.epochs.count == 1)
        let epoch = try #require(epochs.epochs.first)
        #expect(epoch.firstSeq == 7 && epoch.id != id)
        #expect(epochs.id(forSeq: 6) == id && epochs.id(forSeq: 7) == epoch.id && epochs.id(forSeq: 1_000) == epoch.id)
        #expect(epochs.eventID(seq: 7) == "\(epoch.id)-7")

        // The copy opened again where it now is: the same epoch, no new one.
        try withEventLog(directory: copy) { log in #expect(log.epochs == epochs) }
        // Its consumers name the records by their epochs, attached or detached.
        let detached = try DetachedConsumer(directory: copy, name: "sync", creating: true)
        #expect(detached.epochs == epochs && detached.eventID(of: 6) == "\(id)-6" && detached.eventID(of: 7) == "\(epoch.id)-7")
        detached.close()
        // The original never moved: no epoch.
        try withEventLog(directory: original) { log in
            #expect(log.epochs.epochs.isEmpty)
            try log.append(payload(200))
        }
    }

    @Test func aDirectoryMovedWithinItsFilesystemKeepsItsIDs() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let before = dir.path + "/before", after = dir.path + "/after"
        _ = try makeLog(before, count: 3)
        try FileManager.default.moveItem(atPath: before, toPath: after)
        try withEventLog(directory: after) { log in #expect(log.epochs.epochs.isEmpty) }
    }

    /// A copy of a copy opened before it appended anything replaces the epoch that starts at
    /// that seq: no record has that epoch's id.
    @Test func aCopyOfAnUnusedCopyReplacesItsEmptyEpoch() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let original = dir.path + "/a", copy = dir.path + "/b", again = dir.path + "/c"
        _ = try makeLog(original, count: 4)
        try FileManager.default.copyItem(atPath: original, toPath: copy)
        let first = try withEventLog(directory: copy) { $0.epochs }
        try FileManager.default.copyItem(atPath: copy, toPath: again)
        let second = try withEventLog(directory: again) { $0.epochs }
        #expect(first.epochs.count == 1 && second.epochs.count == 1)
        #expect(second.epochs[0].firstSeq == 4 && second.epochs[0].id != first.epochs[0].id)
    }

    @Test(arguments: [
        ("spool epochs 1\nplace 12 -\n5 00112233445566778899aabbccddeeff", "does not end with a newline"),
        ("spool epochs 2\nplace 12 -\n", "line 1"),
        ("spool epochs 1\nplace twelve -\n", "line 2"),
        ("spool epochs 1\nplace 12 -\n5 0011\n", "line 3"),
        ("spool epochs 1\nplace 12 -\n9 00112233445566778899aabbccddeeff\n5 00112233445566778899aabbccddeeff\n", "line 4"),
        ("spool epochs 1\nplace 12 -\n99999999999999999999999 00112233445566778899aabbccddeeff\n", "line 3"),
    ])
    func aDamagedEpochsFileFailsTheOpenNamingItsLineAndIsKept(contents: String, named: String) throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        _ = try makeLog(dir.path, count: 2)
        let path = dir.path + "/EPOCHS"
        try Data(contents.utf8).write(to: URL(fileURLWithPath: path))
        do {
            try withEventLog(directory: dir.path) { _ in }
            Issue.record("a damaged EPOCHS opened")
        } catch let error as SpoolError {
            #expect(error.code == .corrupt && error.description.contains(named) && error.description.contains("EPOCHS"), "\(error)")
        }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == contents, "the file was rewritten")
    }

    @Test func anOversizedEpochsFileIsRefusedWithoutReadingItAll() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        _ = try makeLog(dir.path, count: 1)
        let path = dir.path + "/EPOCHS"
        try Data(repeating: UInt8(ascii: "7"), count: LogEpochs.maxFileSize + 10).write(to: URL(fileURLWithPath: path))
        #expect(throws: SpoolError.self) { try withEventLog(directory: dir.path) { _ in } }
    }
}
