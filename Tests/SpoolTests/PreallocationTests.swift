import Foundation
import Testing
@testable import Spool

/// Synced writes preallocate zeros past the data (so most fdatasyncs need not commit a new file
/// size); sealing and closing cut them, and opening after a crash cuts them without calling
/// them a torn tail (FORMAT.md §6).
@Suite struct PreallocationTests {
    func fileSize(_ path: String) -> Int64 {
        Int64((try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? -1)
    }

    /// Where the blocks of a segment file end (walking their headers from the segment header).
    func blocksEnd(_ bytes: [UInt8]) -> Int {
        blockHeaders(bytes).last.map { $0.offset + $0.header.totalSize } ?? Format.segmentHeaderSize
    }

    /// Copies a live log's directory, as a process killed at this moment would leave it.
    func snapshot(_ dir: TemporaryDirectory) throws -> TemporaryDirectory {
        let copy = TemporaryDirectory("snapshot")
        try FileManager.default.removeItem(atPath: copy.path)
        copyItem(dir.path, to: copy.path)
        return copy
    }

    /// A fresh log given `count` synced records, as a process killed right after them leaves it
    /// (zeros preallocated past the data). The caller removes the returned directory.
    func crashedAfterSyncedAppends(_ count: Int) throws -> TemporaryDirectory {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        for i in 0..<count { try log.appendBlocking(payload(i), durability: .synced) }
        let crashed = try snapshot(dir)
        try log.close()
        return crashed
    }

    @Test func syncedWritesPreallocateAndCloseCutsTheZeros() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        for i in 0..<20 { try log.appendBlocking(payload(i), durability: .synced) }
        let segment = dir.file(Format.segmentName(0))
        let live = readFile(segment)
        #expect(Int64(live.count) == SegmentWriter.preallocationStep, "one step of zeros ahead of 20 small records")
        #expect(live[blocksEnd(live)...].allSatisfy { $0 == 0 })
        #expect(records(try log.readAll()).map(\.payload) == (0..<20).map { payload($0) })
        try log.close()
        let closed = readFile(segment)
        #expect(closed.count == blocksEnd(closed))
        #expect(closed[...] == live[0..<closed.count])
    }

    @Test func writtenOnlyLogsDoNotPreallocate() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        for i in 0..<20 { try log.appendBlocking(payload(i), durability: .written) }
        let live = readFile(dir.file(Format.segmentName(0)))
        #expect(live.count == blocksEnd(live))
        try log.close()
    }

    @Test func aCrashLeavesZerosThatOpeningCutsWithoutCallingThemTorn() throws {
        let crashed = try crashedAfterSyncedAppends(30)
        defer { crashed.cleanup() }
        let before = readFile(crashed.file(Format.segmentName(0)))
        let reopened = try EventLog.open(directory: crashed.path)
        #expect(reopened.recoveryReport.tornTail == nil)
        #expect(reopened.recoveryReport.preallocatedBytesCut == Int64(before.count - blocksEnd(before)))
        #expect(reopened.recoveryReport.preallocatedBytesCut > 0)
        #expect(records(try reopened.readAll()).map(\.payload) == (0..<30).map { payload($0) })
        // Appending after the cut continues the seqs and reads back.
        try reopened.appendBlocking(payload(30), durability: .synced)
        #expect(records(try reopened.readAll()).map(\.seq) == Array(0...30))
        try reopened.close()
    }

    @Test func aTornBlockInPreallocatedSpaceIsATornTail() throws {
        let crashed = try crashedAfterSyncedAppends(10)
        defer { crashed.cleanup() }
        // Half a block written into the zeros, as an interrupted write leaves it.
        let path = crashed.file(Format.segmentName(0))
        var bytes = readFile(path)
        let end = blocksEnd(bytes)
        let last = blockHeaders(bytes).last!
        let half = Array(bytes[last.offset..<last.offset + last.header.totalSize / 2])
        bytes.replaceSubrange(end..<end + half.count, with: half)
        writeFile(path, bytes)
        let reopened = try EventLog.open(directory: crashed.path)
        #expect(reopened.recoveryReport.tornTail?.offset == Int64(end))
        #expect(reopened.recoveryReport.preallocatedBytesCut == 0)
        #expect(records(try reopened.readAll()).map(\.payload) == (0..<10).map { payload($0) })
        try reopened.close()
    }

    @Test func sealedSegmentsKeepNoZeros() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path, configuration: smallConfiguration(segmentSize: 64 * 1024))
        for i in 0..<800 { try log.appendBlocking(noisyPayload(i, size: 250), durability: .synced) }
        let segments = dir.segments()
        #expect(segments.count >= 3)
        for name in segments.dropLast() {
            let bytes = readFile(dir.file(name))
            #expect(bytes.count == blocksEnd(bytes), "\(name)")
        }
        #expect(fileSize(dir.file(segments.last!)) > Int64(blocksEnd(readFile(dir.file(segments.last!)))))
        #expect(records(try log.readAll()).count == 800)
        try log.close()
    }
}
