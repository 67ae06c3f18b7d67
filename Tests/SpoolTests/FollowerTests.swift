import Foundation
import Testing
@testable import Spool

/// `LogFollower` (issue #19, follow): records in order, none skipped or repeated, across
/// segment rolls, writer restarts, torn tails and retention; stopping ends the wait.
/// Each test is bounded: a follower that failed to wake or to stop would wait for ever. The
/// bound catches a hang, not slowness: 2,000 appends each waiting for its write took over a
/// minute on a machine running four builds beside the tests.
@Suite(.timeLimit(.minutes(5))) struct FollowerTests {
    /// 96 hex digits fixed by `i`: payloads that compress little, so small segments roll.
    func noise(_ i: Int) -> String {
        var random = SplitMix64(seed: UInt64(i))
        return (0..<6).map { _ in String(random.next(), radix: 16) }.joined()
    }

    /// Takes items from `follower` until `count` records came, on a thread of its own.
    func collect(_ follower: LogFollower, records count: Int) async throws -> [ReadItem] {
        var items = [ReadItem]()
        var seen = 0
        for try await item in follower.items {
            items.append(item)
            if case .record = item { seen += 1 }
            if seen == count { break }
        }
        return items
    }

    @Test func anInProcessFollowerGetsEveryRecordInOrderAcrossRollsAsTheyAreWritten() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path, configuration: smallConfiguration(blockSize: 1024, segmentSize: 64 * 1024))
        defer { try? log.close() }
        let follower = try log.follow()
        // Written while the follower waits: each batch wakes it.
        let writer = Task.detached {
            for i in 0..<2_000 {
                _ = try log.append("event \(i) " + noise(i))
                if i % 100 == 0 { try await Task.sleep(for: .milliseconds(2)) }
            }
        }
        let items = try await collect(follower, records: 2_000)
        try await writer.value
        let got = records(items)
        #expect(got.map(\.seq) == Array(0..<2_000))
        #expect(got.map { String(decoding: $0.payload, as: UTF8.self) } == (0..<2_000).map { "event \($0) " + noise($0) })
        #expect(items.count == got.count, "notices where none were due: \(items.filter { if case .notice = $0 { true } else { false } })")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { Format.baseSeq(ofSegmentNamed: $0) != nil }.count > 1,
                "the log rolled")
    }

    @Test func stopEndsAWaitingFollowerAndTheSequence() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        _ = try log.append("only")
        try log.syncBlocking()
        try log.close()
        let follower = try LogFollower(directory: dir.path)
        let reading = Task {
            var payloads = [String]()
            for try await item in follower.items {
                if case .record(let record) = item { payloads.append(String(decoding: record.payload, as: UTF8.self)) }
            }
            return payloads
        }
        // Handed out "only" (then waits at the end); the bound only keeps a broken build from hanging.
        for _ in 0..<500 where follower.position < 1 { try await Task.sleep(for: .milliseconds(10)) }
        try await Task.sleep(for: .milliseconds(20))
        follower.stop()
        #expect(try await reading.value == ["only"])
        #expect(try follower.next() == nil)
        #expect(follower.position == 1)
    }

    @Test func cancellingTheIteratingTaskStopsTheFollower() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        try EventLog.open(directory: dir.path).close()
        let follower = try LogFollower(directory: dir.path)
        let reading = Task { for try await _ in follower.items {} }
        try await Task.sleep(for: .milliseconds(50))
        reading.cancel()
        try await reading.value
        #expect(try follower.nextBatch().isEmpty, "a cancelled follower is stopped")
    }

    /// The follower reads the directory as another process would: the writer here is only a
    /// source of files. It is closed and reopened (a restart) with a torn tail left between.
    @Test func aDirectoryFollowerCrossesRollsRestartsAndATornTailWithoutSkipOrRepeat() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let configuration = smallConfiguration(blockSize: 1024, segmentSize: 64 * 1024)
        var log = try EventLog.open(directory: dir.path, configuration: configuration)
        _ = try log.append("before the follower")
        try log.syncBlocking()
        let follower = try LogFollower(directory: dir.path)
        let reading = Task { try await collect(follower, records: 1_201) }
        var expected = ["before the follower"]
        for round in 0..<3 {
            for i in 0..<400 {
                let text = "round \(round) record \(i) " + noise(i)
                _ = try log.append(text)
                expected.append(text)
                if i % 50 == 0 { try log.syncBlocking() }
            }
            try log.syncBlocking()
            try log.close()
            // A crash's torn tail: half a block's bytes after the last whole one. The follower
            // must not read it; the next writing open cuts it.
            let segments = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { Format.baseSeq(ofSegmentNamed: $0) != nil }.sorted()
            let active = dir.file(try #require(segments.last))
            let handle = try #require(FileHandle(forWritingAtPath: active))
            try handle.seekToEnd()
            try handle.write(contentsOf: Data([0x53, 0x50, 0x42, 0x4B, 9, 9, 9, 9, 9, 9, 9]))
            try handle.close()
            try await Task.sleep(for: .milliseconds(20))
            log = try EventLog.open(directory: dir.path, configuration: configuration)
            #expect(log.recoveryReport.tornTail != nil)
        }
        let items = try await reading.value
        try log.close()
        let got = records(items)
        #expect(got.map(\.seq) == Array(0..<UInt64(expected.count)))
        #expect(got.map { String(decoding: $0.payload, as: UTF8.self) } == expected)
        #expect(items.count == got.count, "no notice: a torn tail is not damage")
    }

    @Test func segmentsDeletedByTheCapBeforeTheFollowerGotThereReadAsDropped() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var configuration = smallConfiguration(blockSize: 1024, segmentSize: 64 * 1024)
        configuration.maxBytes = 128 * 1024
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        defer { try? log.close() }
        _ = try log.append("first")
        try log.syncBlocking()
        let follower = try LogFollower(directory: dir.path, from: 0)
        // The cap deletes seq 0's segment and more before the follower reads anything (in
        // however many writes the writer thread makes of them: one, if it was starved).
        for i in 0..<6_000 { _ = try log.append("filler \(i) " + noise(i)) }
        try log.syncBlocking()
        var items = [ReadItem]()
        while records(items).last?.seq != 6_000 { items += try follower.nextBatch() }
        // Dropped notices first (one per look at the directory), covering 0 up to the first
        // record still stored; then every record once, in order.
        var next: UInt64 = 0
        for item in items {
            guard case .notice(let notice) = item else { break }
            #expect(notice.kind == .dropped && notice.range.lowerBound == next, "\(notice)")
            next = notice.range.upperBound
        }
        #expect(next > 0, "the cap deleted seq 0 before the follower read it")
        let got = records(items)
        #expect(got.first?.seq == next)
        #expect(got.map(\.seq) == Array(next...6_000))
        #expect(items.count - got.count == items.prefix { if case .notice = $0 { true } else { false } }.count, "no notice after the records began")
    }
}
