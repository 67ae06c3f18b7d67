import Foundation
import Testing
@testable import Spool

/// A META copied in from another log is refused whatever the active segment holds, and no
/// segment header is ever rewritten with the foreign identity (issue #21, item 4).
@Suite struct ForeignMetaTests {
    /// A log of 40 records whose active segment is then an empty, header-only segment at seq 40,
    /// as a kill right after a segment roll leaves it.
    func makeLogEndingInAnEmptySegment(_ dir: TemporaryDirectory) throws -> LogID {
        let id = try withEventLog(directory: dir.path) { log -> LogID in
            for i in 0..<40 { try log.append(payload(i)) }
            return log.id
        }
        let header = SegmentHeader(baseSeq: 40, createdMillis: wallClockMillis(), logID: id)
        try #require(FileManager.default.createFile(atPath: dir.file(Format.segmentName(40)), contents: Data(header.encoded()),
                                                    attributes: [.posixPermissions: 0o600]))
        return id
    }

    @Test(arguments: [true, false])
    func aForeignMetaIsRefusedAndNothingIsRewritten(emptyActiveSegment: Bool) throws {
        let dir = TemporaryDirectory()
        let other = TemporaryDirectory("other")
        defer { dir.cleanup(); other.cleanup() }
        if emptyActiveSegment {
            _ = try makeLogEndingInAnEmptySegment(dir)
        } else {
            try withEventLog(directory: dir.path) { log in for i in 0..<40 { try log.append(payload(i)) } }
        }
        try withEventLog(directory: other.path) { _ in }
        let ownMeta = try #require(FileManager.default.contents(atPath: dir.file(Format.metaFileName)))
        let segmentsBefore = dir.segments().map { FileManager.default.contents(atPath: dir.file($0)) }
        try FileManager.default.removeItem(atPath: dir.file(Format.metaFileName))
        try FileManager.default.copyItem(atPath: other.file(Format.metaFileName), toPath: dir.file(Format.metaFileName))

        #expect { try EventLog.open(directory: dir.path).close() } throws: {
            ($0 as? SpoolError)?.code == .corrupt && "\($0)".contains("belongs to log")
        }
        #expect { try LogSnapshot(directory: dir.path).close() } throws: { ($0 as? SpoolError)?.code == .corrupt }
        #expect(dir.segments().map { FileManager.default.contents(atPath: dir.file($0)) } == segmentsBefore)

        // The log's own META back: it opens, every record is there, and appends go on.
        try FileManager.default.removeItem(atPath: dir.file(Format.metaFileName))
        try ownMeta.write(to: URL(fileURLWithPath: dir.file(Format.metaFileName)))
        try withEventLog(directory: dir.path) { log in
            let read = try log.readAll()
            let seq = try log.appendBlocking(payload(40), durability: .synced)
            let report = try log.verify()
            #expect(log.nextSeq == 41 && records(read).count == 40 && seq == 40 && report.isClean)
        }
    }
}
