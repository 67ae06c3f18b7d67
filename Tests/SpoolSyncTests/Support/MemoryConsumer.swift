import Spool
import Synchronization

/// A `LogConsumer` in memory: records in a list, a committed offset, injectable read and
/// commit failures. It keeps Spool's contract: a read starts at the committed offset and
/// returns the same records until they are committed, `endSeq` is exclusive, and a commit
/// backwards or past the last record throws `.invalidCommit` (committing the offset it has is
/// a no-op). Every commit is durable; nothing expires; records marked ``damage(_:)`` are
/// skipped with a `corrupt` notice, as a log's reader skips damaged bytes.
final class MemoryConsumer: LogConsumer {
    private struct State {
        var records: [Record] = []
        var committed: UInt64 = 0
        var handlers: [(id: Int, handler: @Sendable (UInt64) -> Void)] = []
        var nextHandlerID = 0
        var commitFailures = 0
        var readFailures = 0
        var commits: [UInt64] = []
        var reads: [[UInt64]] = []
        var damaged: Set<UInt64> = []
    }

    private let state = Mutex(State())
    let name = "test"
    let logID = LogID(bytes: Array(0..<16))
    /// No directory: a worker made with `init(consumer:…deadLetters:clock:…)` never asks for one.
    let directory = "/nonexistent/memory-consumer"
    let configuration = Configuration()

    init(records count: Int = 0) {
        append(count, notify: false)
    }

    /// A consumer of a log that holds `records` (their seqs must be 0, 1, 2…): a collector's
    /// log of origin records, say.
    init(holding records: [Record]) {
        precondition(records.indices.allSatisfy { records[$0].seq == UInt64($0) }, "seqs from 0, one after another")
        state.withLock { $0.records = records }
    }

    /// The seqs every read returned, read by read.
    var reads: [[UInt64]] { state.withLock { $0.reads } }

    var committed: UInt64 { state.withLock { $0.committed } }
    var pendingRecords: UInt64 { state.withLock { UInt64($0.records.count) - $0.committed } }
    /// The end of every commit that returned, in order (a no-op commit included).
    var commits: [UInt64] { state.withLock { $0.commits } }

    /// Makes `seqs` unreadable: reads skip them with a `corrupt` notice a run.
    func damage(_ seqs: Range<UInt64>) { state.withLock { $0.damaged.formUnion(seqs) } }

    /// Makes the next `count` commits fail with an I/O error.
    func failCommits(_ count: Int) { state.withLock { $0.commitFailures = count } }
    /// Makes the next `count` reads fail with an I/O error.
    func failReads(_ count: Int) { state.withLock { $0.readFailures = count } }

    /// Appends `count` records `{"n":<seq>}` and tells the watchers.
    func append(_ count: Int, notify: Bool = true) {
        let (end, handlers) = state.withLock { state -> (UInt64, [@Sendable (UInt64) -> Void]) in
            for _ in 0..<count {
                let seq = UInt64(state.records.count)
                state.records.append(Record(seq: seq, timestamp: 1_700_000_000_000 + Int64(seq), payload: Array("{\"n\":\(seq)}".utf8)))
            }
            return (UInt64(state.records.count), state.handlers.map(\.handler))
        }
        if notify { for handler in handlers { handler(end) } }
    }

    func read(maxCount: Int, maxBytes: Int) throws -> ConsumerBatch {
        guard maxCount >= 1, maxBytes >= 1 else {
            throw SpoolError(.invalidArgument, "read(maxCount: \(maxCount), maxBytes: \(maxBytes)): both must be at least 1")
        }
        return try state.withLock { state in
            if state.readFailures > 0 {
                state.readFailures -= 1
                throw SpoolError(.io, "injected read failure")
            }
            var records: [Record] = []
            var notices: [ReadNotice] = []
            var bytes = 0
            var end = state.committed
            for record in state.records[Int(state.committed)...] {
                if state.damaged.contains(record.seq) {
                    if let last = notices.last, last.range.upperBound == record.seq {
                        notices[notices.count - 1].range = last.range.lowerBound..<record.seq + 1
                    } else {
                        notices.append(ReadNotice(kind: .corrupt, range: record.seq..<record.seq + 1, detail: "memory.seg: damaged"))
                    }
                    end = record.seq + 1
                    continue
                }
                if records.count == maxCount || (!records.isEmpty && bytes + record.payload.count > maxBytes) { break }
                records.append(record)
                bytes += record.payload.count
                end = record.seq + 1
            }
            state.reads.append(records.map(\.seq))
            return ConsumerBatch(records: records, notices: notices, endSeq: end, startSeq: state.committed)
        }
    }

    func commit(upTo end: UInt64, mode: CommitMode) throws {
        try state.withLock { state in
            if state.commitFailures > 0 {
                state.commitFailures -= 1
                throw SpoolError(.io, "injected commit failure")
            }
            if end != state.committed {
                guard end > state.committed else {
                    throw SpoolError(.invalidCommit, "consumer \(name): committing up to \(end) would move the offset backwards from \(state.committed)")
                }
                guard end <= UInt64(state.records.count) else {
                    throw SpoolError(.invalidCommit, "consumer \(name): cannot commit up to \(end); \(state.records.count) records were written")
                }
                state.committed = end
            }
            state.commits.append(end)
        }
    }

    /// How many watchers are registered (a stopped worker must have cancelled its own).
    var observerCount: Int { state.withLock { $0.handlers.count } }

    func watchWrites(_ handler: @escaping @Sendable (UInt64) -> Void) throws -> WriteObservation {
        let id = state.withLock { state -> Int in
            state.nextHandlerID += 1
            state.handlers.append((state.nextHandlerID, handler))
            return state.nextHandlerID
        }
        return WriteObservation { [weak self] in self?.state.withLock { $0.handlers.removeAll { $0.id == id } } }
    }
}
