import Foundation
import Testing
@testable import Spool

/// Model-based tests: random sequences of operations run against the real log and against a
/// plain in-memory model; after every step the two must agree.
@Suite struct ModelTests {
    @Test(arguments: [1, 2, 3, 4, 5, 6] as [UInt64])
    func randomAppendSyncReopenReadMatchesTheModel(seed: UInt64) async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var generator = SeededGenerator(seed: seed)
        var configuration = smallConfiguration(blockSize: 2048, segmentSize: 64 * 1024)
        configuration.linger = .milliseconds(Int64(generator.next() % 3))
        var log = try EventLog.open(directory: dir.path, configuration: configuration)
        var model = [[UInt8]]()  // model[seq] = payload
        for step in 0..<250 {
            switch generator.next() % 100 {
            case 0..<55:  // append a burst at a random level
                let count = Int(1 + generator.next() % 40)
                let level = Durability.allCases[Int(generator.next() % 3)]
                for _ in 0..<count {
                    let bytes = noisyPayload(model.count, size: Int(generator.next() % 700))
                    let seq = level == .buffered ? try log.append(bytes) : try await log.append(bytes, durability: level)
                    #expect(seq == UInt64(model.count), "seed \(seed) step \(step)")
                    model.append(bytes)
                }
            case 55..<65:
                try await log.sync()
                #expect(log.syncedEnd == UInt64(model.count))
            case 65..<75:  // close and reopen: everything appended survives a clean close
                try log.close()
                log = try EventLog.open(directory: dir.path, configuration: configuration)
                #expect(log.nextSeq == UInt64(model.count), "seed \(seed) step \(step)")
            case 75..<90:  // read a random range
                try log.syncBlocking()
                guard !model.isEmpty else { continue }
                let from = Int(generator.next() % UInt64(model.count))
                let reader = log.reader(from: UInt64(from))
                var seq = from
                while let item = try reader.next() {
                    guard case .record(let record) = item else {
                        Issue.record("seed \(seed) step \(step): unexpected \(item)")
                        break
                    }
                    #expect(record.seq == UInt64(seq))
                    #expect(record.payload == model[seq], "seed \(seed) step \(step) seq \(seq)")
                    seq += 1
                }
                #expect(seq == model.count, "seed \(seed) step \(step)")
            default:  // a big record near the block size boundary
                let bytes = noisyPayload(model.count, size: 2048 + Int(generator.next() % 64) - 32)
                #expect(try log.append(bytes) == UInt64(model.count))
                model.append(bytes)
            }
        }
        try log.syncBlocking()
        #expect(records(try log.readAll()).map(\.payload) == model)
        #expect(try log.verify().isClean)
        try log.close()
    }

    @Test(arguments: [11, 12, 13, 14] as [UInt64])
    func randomConsumersRetentionAndCapsNeverLoseWhatAConsumerNeeds(seed: UInt64) throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var generator = SeededGenerator(seed: seed)
        var configuration = smallConfiguration(blockSize: 4096, segmentSize: 64 * 1024)
        configuration.linger = .zero
        let capped = seed % 2 == 0
        if capped { configuration.maxBytes = 256 * 1024 }
        var log = try EventLog.open(directory: dir.path, configuration: configuration)
        var model = [[UInt8]]()
        var delivered: [String: UInt64] = ["a": 0, "b": 0]  // next seq each consumer expects
        _ = try log.consumer(named: "a")
        _ = try log.consumer(named: "b")
        for step in 0..<300 {
            switch generator.next() % 10 {
            case 0..<5:
                for _ in 0..<Int(1 + generator.next() % 60) {
                    let bytes = noisyPayload(model.count, size: 200 + Int(generator.next() % 800))
                    try log.append(bytes)
                    model.append(bytes)
                }
                try log.syncBlocking()
            case 5..<8:
                let name = generator.next() % 2 == 0 ? "a" : "b"
                let consumer = try log.consumer(named: name)
                let batch = try consumer.read(maxCount: Int(1 + generator.next() % 200))
                var expected = delivered[name]!
                // Records and notices interleave by seq (a segment can be dropped mid-batch).
                let items = batch.records.map { ReadItem.record($0) } + batch.notices.map { ReadItem.notice($0) }
                let ordered = items.sorted { start($0) < start($1) }
                for item in ordered {
                    switch item {
                    case .notice(let notice):
                        #expect(notice.kind == .dropped && capped, "seed \(seed) step \(step): \(notice)")
                        #expect(notice.range.lowerBound == expected, "seed \(seed) step \(step)")
                        expected = notice.range.upperBound
                    case .record(let record):
                        #expect(record.seq == expected, "seed \(seed) step \(step)")
                        #expect(record.payload == model[Int(record.seq)])
                        expected = record.seq + 1
                    }
                }
                if !batch.isEmpty, generator.next() % 4 != 0 {
                    try consumer.commit(batch, mode: generator.next() % 3 == 0 ? .fast : .durable)
                    delivered[name] = batch.endSeq
                }
            case 8:
                try log.close()
                log = try EventLog.open(directory: dir.path, configuration: configuration)
                // A clean close keeps even fast commits (they are written, only not fsynced).
                for name in ["a", "b"] { #expect(try log.consumer(named: name).committed == delivered[name]!) }
            default:
                if !capped {
                    // Without a cap, everything any consumer still needs is stored.
                    #expect(log.firstSeq <= delivered.values.min()!, "seed \(seed) step \(step)")
                }
            }
            if let cap = configuration.maxBytes {
                #expect(log.stats().diskBytes <= Int64(cap + 8 * 4096), "seed \(seed) step \(step)")
            }
        }
        try log.close()
    }

    private func start(_ item: ReadItem) -> UInt64 {
        switch item {
        case .record(let record): return record.seq
        case .notice(let notice): return notice.range.lowerBound
        }
    }
}

@Suite struct ReadNoticeTests {
    /// Segment names and block seqs come from files: a notice over more than `Int.max` seqs
    /// (a crafted `10000000000000000000.seg`) is counted and printed, not a crash.
    @Test func aNoticeWiderThanIntMaxCountsAndPrints() {
        let notice = ReadNotice(kind: .corrupt, range: 0..<10_000_000_000_000_000_000, detail: "crafted")
        #expect(notice.count == 10_000_000_000_000_000_000)
        #expect(notice.description.contains("10000000000000000000"))
    }
}
