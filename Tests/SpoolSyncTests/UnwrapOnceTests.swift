import Foundation
import Spool
import Synchronization
import Testing
@testable import SpoolSync

/// The worker unwraps a collector's records once, where it reads a batch, and hands every sink
/// the same ``OutgoingRecord``s: a split after a 413 and a retry send what was unwrapped,
/// never decoding a record twice for one read; a record that does not decode goes out under
/// the collector log's own id whatever the sink's form; and a sink written for `Record`s
/// still works for the one release its form stays.
@Suite struct UnwrapOnceTests {
    /// The collector's log: its consumer's id (``MemoryConsumer``'s).
    static let collector = LogID(bytes: Array(0..<16))
    static let device = LogID(bytes: Array(repeating: 0xD1, count: 16))

    /// Four origin records of one device, then one that does not decode (too short).
    static let records: [Record] = (0..<4).map { seq in
        Record(seq: UInt64(seq), timestamp: 1_700_000_000_000 + Int64(seq),
               payload: OriginRecord(log: device, seq: 10 + UInt64(seq), time: 500, payload: Array(#"{"d":\#(seq)}"#.utf8)).encoded())
    } + [Record(seq: 4, timestamp: 1_700_000_000_004, payload: Array("not an origin record".utf8))]

    /// The five records as every sink must receive them.
    static var expected: [OutgoingRecord] {
        RecordUnwrapper(logID: collector, origins: true).unwrap(records)
    }

    /// A 413 for the first request, a 503 for the second, then every request accepted.
    static let script: [SinkOutcome] = [
        .tooLarge(SyncError(.payloadTooLarge, "413", status: 413)),
        .retry(SyncError(.serverError, "503", status: 503)),
    ]

    func worker(
        _ consumer: MemoryConsumer, _ sink: some SyncSink, concurrency: SyncConfiguration.Concurrency = .fixed(1)
    ) throws -> SyncWorker<ManualClock> {
        var configuration = SyncConfiguration.manual
        configuration.concurrency = concurrency
        return try SyncWorker(consumer: consumer, sink: sink, configuration: configuration, deadLetters: nil, clock: ManualClock(), random: { 0 })
    }

    /// Across a 413 (the batch split in two) and a 503, each read's records are unwrapped once:
    /// the split's halves are the very records of the refused batch (the same storage), and a
    /// record has at most as many unwrapped copies as reads returned it. (With one request at
    /// a time, a retry reads again from the committed offset, so that records that expired
    /// meanwhile are skipped: that read unwraps what it returns once more, and no more.)
    @Test func aCollectorBatchIsUnwrappedOncePerReadAcrossARetryAndASplit() async throws {
        let consumer = MemoryConsumer(holding: Self.records)
        let sink = RecordingSink(script: Self.script)
        let report = try await worker(consumer, sink).flush(retries: 2)
        #expect(report.failure == nil)
        #expect(consumer.committed == 5)

        let prepared = sink.prepared
        try #require(prepared.count >= 3, "the batch, the 413's halves: \(prepared.map { $0.map(\.stored.seq) })")
        #expect(prepared[0] == Self.expected)
        #expect(prepared.allSatisfy { batch in batch.allSatisfy { Self.expected[Int($0.stored.seq)] == $0 } })
        // The halves of the refused batch: its own unwrapped records, not unwrapped again.
        let first = Set(prepared[0].compactMap(Self.storage))
        #expect(prepared[1].map(\.stored.seq) == [0, 1])
        #expect(prepared[1].compactMap(Self.storage).allSatisfy(first.contains))
        // At most one unwrap per read that returned the record.
        let returned = consumer.reads.flatMap { $0 }
        for seq in 0..<UInt64(4) {
            let copies = Set(prepared.flatMap { $0 }.filter { $0.stored.seq == seq }.compactMap(Self.storage))
            #expect(copies.count >= 1 && copies.count <= returned.count { $0 == seq }, "record \(seq): \(copies.count) unwraps")
        }
        // Both refusals were answered before everything was accepted.
        #expect(sink.sent.count >= 3)
    }

    /// With requests in parallel, a failed batch is retried on its own, from memory: the
    /// retry, like the split before it, sends the records the one read unwrapped, so each
    /// origin record is unwrapped exactly once in all.
    @Test func aBatchRetriedOnItsOwnIsNotUnwrappedAgain() async throws {
        let consumer = MemoryConsumer(holding: Self.records)
        let sink = RecordingSink(script: Self.script)
        let report = try await worker(consumer, sink, concurrency: .fixed(2)).flush(retries: 2)
        #expect(report.failure == nil)
        #expect(consumer.committed == 5)
        let sent = sink.sent.map { $0.map(\.stored.seq) }
        // The batch (413), its first half (503), then both halves, the first one again.
        #expect(sent.first == [0, 1, 2, 3, 4] && sent.count(where: { $0 == [0, 1] }) == 2, "\(sent)")
        let received = sink.prepared.flatMap { $0 } + sink.sent.flatMap { $0 }
        #expect(received.allSatisfy { Self.expected[Int($0.stored.seq)] == $0 })
        for seq in 0..<UInt64(4) {
            let copies = Set(received.filter { $0.stored.seq == seq }.compactMap(Self.storage))
            #expect(copies.count == 1, "record \(seq) was unwrapped \(copies.count) times")
        }
    }

    /// A record of a collector's log that does not decode goes out under the collector log's
    /// own id and seq, with its exact bytes, through the worker.
    @Test func aRecordThatDoesNotDecodeGoesOutUnderTheCollectorLogsOwnId() async throws {
        let consumer = MemoryConsumer(holding: Self.records)
        let sink = RecordingSink(script: [])
        #expect(try await worker(consumer, sink).flush().failure == nil)
        let last = try #require(sink.prepared.first?.last)
        #expect(last.id == Self.collector.eventID(seq: 4))
        #expect(last.log == Self.collector && last.seq == 4 && last.time == 1_700_000_000_004)
        #expect(last.bytes == Self.records[4].payload && !last.isOrigin)
        #expect(sink.prepared.first?.prefix(4).allSatisfy { $0.isOrigin && $0.log == Self.device } == true)
    }

    /// The address of an origin record's unwrapped bytes: a new array each time one is
    /// decoded (a record that is not unwrapped shares the stored payload: `nil`).
    static func storage(_ record: OutgoingRecord) -> UInt? {
        guard record.isOrigin else { return nil }
        return record.bytes.withUnsafeBufferPointer { $0.baseAddress.map { UInt(bitPattern: $0) } }
    }
}

/// Answers each request by `script`, in order, then accepts; `send`'s index counts requests.
private final class Script: Sendable {
    private let outcomes: [SinkOutcome]
    private let count = Mutex(0)

    init(_ outcomes: [SinkOutcome]) { self.outcomes = outcomes }

    func next() -> SinkOutcome {
        let index = count.withLock { count in
            defer { count += 1 }
            return count
        }
        return index < outcomes.count ? outcomes[index] : .accepted
    }
}

/// A sink of the `OutgoingRecord` form, as a third party writes one now: it keeps every batch
/// it is given, and its request is the records themselves.
private final class RecordingSink: SyncSink {
    let script: Script
    let log = Mutex<[[OutgoingRecord]]>([])
    let requests = Mutex<[[OutgoingRecord]]>([])

    init(script: [SinkOutcome]) { self.script = Script(script) }

    var unwrapper: RecordUnwrapper? { RecordUnwrapper(logID: UnwrapOnceTests.collector, origins: true) }
    /// What every `prepare` was given, in order.
    var prepared: [[OutgoingRecord]] { log.withLock { $0 } }
    /// The requests sent, in order.
    var sent: [[OutgoingRecord]] { requests.withLock { $0 } }

    func prepare(_ records: ArraySlice<OutgoingRecord>, maxBytes: Int) -> SinkRequest<[OutgoingRecord]> {
        prepare(exactly: Array(records))
    }

    func prepare(exactly records: [OutgoingRecord]) -> SinkRequest<[OutgoingRecord]> {
        log.withLock { $0.append(records) }
        return SinkRequest(body: records, count: records.count, bytes: records.reduce(0) { $0 + $1.bytes.count })
    }

    func send(_ request: [OutgoingRecord], timeout: Duration) async -> SinkOutcome {
        requests.withLock { $0.append(request) }
        return script.next()
    }
}
