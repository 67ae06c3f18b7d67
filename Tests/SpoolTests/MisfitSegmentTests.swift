import Foundation
import Testing
@testable import Spool

/// A file named like a segment that cannot hold records where its name puts it is set aside
/// (`<name>.misfit`), never written into, and no seq is handed out twice (issue #21, item 2).
@Suite struct MisfitSegmentTests {
    /// 100 records `r0`…`r99` in one segment.
    func makeLog(_ dir: TemporaryDirectory) throws {
        try withEventLog(directory: dir.path) { log in
            for i in 0..<100 { try log.append(Array("r\(i)".utf8)) }
        }
    }

    func texts(_ items: [ReadItem]) -> [String] { records(items).map { String(decoding: $0.payload, as: UTF8.self) } }

    @Test func anEmptyFileNamedInsideTheLastSegmentIsSetAsideAndSeqsAreNotReused() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        try makeLog(dir)
        let misfit = Format.segmentName(50)
        try #require(FileManager.default.createFile(atPath: dir.file(misfit), contents: nil))

        // A snapshot finds it, leaves it, and verify fails while it is there.
        let snapshot = try LogSnapshot(directory: dir.path)
        #expect(snapshot.recoveryReport.setAsideSegments == [misfit])
        #expect(snapshot.endSeq == 100)
        #expect(try snapshot.verify().isClean == false)
        #expect(texts(try snapshot.readAll(from: 50)).first == "r50")
        snapshot.close()
        #expect(FileManager.default.fileExists(atPath: dir.file(misfit)))

        let seqs = try withEventLog(directory: dir.path) { log -> [UInt64] in
            #expect(log.recoveryReport.setAsideSegments == [misfit])
            let seqs = try ["new1", "new2"].map { try log.appendBlocking(Array($0.utf8), durability: .synced) }
            #expect(texts(try log.readAll(from: 50)).prefix(2) == ["r50", "r51"])
            return seqs
        }
        #expect(seqs == [100, 101])
        #expect(!FileManager.default.fileExists(atPath: dir.file(misfit)))
        #expect(FileManager.default.fileExists(atPath: dir.file(misfit + Format.misfitSuffix)))

        let after = try LogSnapshot(directory: dir.path)
        defer { after.close() }
        #expect(after.recoveryReport.setAsideSegments.isEmpty)
        #expect(try after.verify().isClean)
        let all = texts(try after.readAll())
        #expect(all.count == 102 && all[50] == "r50" && all.suffix(2) == ["new1", "new2"])
    }

    @Test func aCopyOfAnEarlierSegmentNamedAfterItIsSetAside() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        try makeLog(dir)
        // The whole first segment again, renamed to start at 40 (its header says 0: damage too).
        try FileManager.default.copyItem(atPath: dir.file(Format.segmentName(0)), toPath: dir.file(Format.segmentName(40)))
        let next = try withEventLog(directory: dir.path) { log -> UInt64 in
            #expect(log.recoveryReport.setAsideSegments == [Format.segmentName(40)])
            return try log.appendBlocking(Array("new".utf8), durability: .synced)
        }
        #expect(next == 100)
    }

    @Test func anEmptySegmentFileBeforeTheLastIsSetAside() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var configuration = rollingConfiguration()
        configuration.segmentSize = 64 * 1024
        let names = try withEventLog(directory: dir.path, configuration: configuration) { try appendAcrossSegments($0, in: dir, count: 300) }
        try #require(names.count >= 3)
        // An empty file between the first two segments.
        let first = try #require(Format.baseSeq(ofSegmentNamed: names[0]))
        let misfit = Format.segmentName(first + 1)
        try #require(FileManager.default.createFile(atPath: dir.file(misfit), contents: nil))
        let snapshot = try LogSnapshot(directory: dir.path)
        defer { snapshot.close() }
        #expect(snapshot.recoveryReport.setAsideSegments == [misfit])
        let read = try snapshot.readAll()
        #expect(records(read).count == 300 && notices(read).isEmpty)
    }

    @Test func aSegmentThatContinuesTheSequenceIsKept() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let names = try withEventLog(directory: dir.path, configuration: rollingConfiguration()) { try appendAcrossSegments($0, in: dir, count: 300) }
        try #require(names.count >= 2)
        try withEventLog(directory: dir.path, configuration: rollingConfiguration()) { log in
            #expect(log.recoveryReport.setAsideSegments.isEmpty)
            #expect(log.nextSeq == 300)
        }
        #expect(dir.segments() == names)
    }

    /// A segment named `base` holding `texts` (at seqs `base...`) with the log id of the log in
    /// `dir`, made in a log of its own: a copy of stored records as a restored backup leaves it.
    func copiedSegment(of dir: TemporaryDirectory, base: UInt64, texts: [String]) throws -> String {
        let other = TemporaryDirectory("\(#function)-\(base)")
        defer { other.cleanup() }
        try FileManager.default.copyItem(atPath: dir.file(Format.metaFileName), toPath: other.file(Format.metaFileName))
        // An offset at `base` makes the log's next seq `base` (FORMAT.md §6 step 5).
        try FileManager.default.createDirectory(atPath: other.file(Format.consumersDirectory), withIntermediateDirectories: true)
        try OffsetFile.create(Consumers.path(of: "c", logDirectory: other.path), directory: other.file(Format.consumersDirectory),
                              nextSeq: base, permissions: 0o600)
        try withEventLog(directory: other.path) { log in
            for text in texts { try log.append(Array(text.utf8)) }
        }
        let name = Format.segmentName(base)
        let copy = dir.file(name + ".copy")
        try FileManager.default.copyItem(atPath: other.file(name), toPath: copy)
        return copy
    }

    /// Issue #27: a last segment whose first block starts at its own name, below the end of the
    /// segment before it, is set aside whether its records end below that end or past it; the
    /// stored records are read once, and the next append gets the seq past them.
    @Test(arguments: [15, 25]) func aCopyOfStoredRecordsAsTheLastSegmentIsSetAside(copyEnd: Int) throws {
        let dir = TemporaryDirectory("\(#function)-\(copyEnd)")
        defer { dir.cleanup() }
        try withEventLog(directory: dir.path) { log in
            for i in 0..<20 { try log.append(Array("r\(i)".utf8)) }
        }
        let copy = try copiedSegment(of: dir, base: 10, texts: (10..<copyEnd).map { "copy\($0)" })
        let misfit = Format.segmentName(10)
        try FileManager.default.moveItem(atPath: copy, toPath: dir.file(misfit))

        let snapshot = try LogSnapshot(directory: dir.path)
        #expect(snapshot.recoveryReport.setAsideSegments == [misfit])
        #expect(try snapshot.verify().isClean == false)
        #expect(texts(try snapshot.readAll()) == (0..<20).map { "r\($0)" })
        snapshot.close()

        let next = try withEventLog(directory: dir.path) { log -> UInt64 in
            #expect(log.recoveryReport.setAsideSegments == [misfit])
            #expect(texts(try log.readAll()) == (0..<20).map { "r\($0)" })
            return try log.appendBlocking(Array("new".utf8), durability: .synced)
        }
        #expect(next == 20)
        #expect(FileManager.default.fileExists(atPath: dir.file(misfit + Format.misfitSuffix)))
    }

    /// FORMAT.md §2: when a sealed segment's valid blocks run past the next segment's base seq,
    /// the next segment (named for those seqs) wins, even inside a block that straddles it; the
    /// seqs it does not hold read as missing, never twice.
    @Test func aSealedSegmentsRecordsPastTheNextBaseAreTheNextSegments() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        // One block of 20 records (0..<20), then a copy named 10 holding 10..<15, then a last
        // segment at 20 (made as the copy was).
        try withEventLog(directory: dir.path) { log in
            for i in 0..<20 { try log.append(Array("r\(i)".utf8)) }
        }
        let middle = try copiedSegment(of: dir, base: 10, texts: (10..<15).map { "copy\($0)" })
        let last = try copiedSegment(of: dir, base: 20, texts: (20..<22).map { "last\($0)" })
        try FileManager.default.moveItem(atPath: middle, toPath: dir.file(Format.segmentName(10)))
        try FileManager.default.moveItem(atPath: last, toPath: dir.file(Format.segmentName(20)))

        try withEventLog(directory: dir.path) { log in
            #expect(log.recoveryReport.setAsideSegments.isEmpty)
            let items = try log.readAll()
            #expect(texts(items) == (0..<10).map { "r\($0)" } + (10..<15).map { "copy\($0)" } + (20..<22).map { "last\($0)" })
            #expect(notices(items).map(\.range) == [15..<20])
            #expect(notices(items).map(\.kind) == [.missing])
            #expect(log.nextSeq == 22)
        }
    }
}
