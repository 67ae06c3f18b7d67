import Testing
import Spool
import Synchronization
@testable import SpoolSync

/// An in-memory consumer: records in a list, an offset, injectable read and commit failures.
final class MemorySource: SyncSource {
    private struct State {
        var records: [Record] = []
        var committed: UInt64 = 0
        var handlers: [(id: Int, handler: @Sendable (UInt64) -> Void)] = []
        var nextHandlerID = 0
        var commitFailures = 0
        var readFailures = 0
        var commits: [UInt64] = []
    }

    private let state = Mutex(State())
    let logID = LogID(bytes: Array(0..<16))
    let consumerName = "test"

    init(records count: Int = 0) {
        append(count, notify: false)
    }

    var committedOffset: UInt64 { state.withLock { $0.committed } }
    var pendingRecords: UInt64 { state.withLock { UInt64($0.records.count) - $0.committed } }
    var commits: [UInt64] { state.withLock { $0.commits } }

    /// Makes the next `count` commits fail with an I/O error.
    func failCommits(_ count: Int) { state.withLock { $0.commitFailures = count } }
    /// Makes the next `count` reads fail with an I/O error.
    func failReads(_ count: Int) { state.withLock { $0.readFailures = count } }

    /// Appends `count` records `{"n":<seq>}` and tells the observers.
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

    func nextBatch(maxCount: Int, maxBytes: Int) async throws -> SourceBatch {
        try state.withLock { state in
            if state.readFailures > 0 {
                state.readFailures -= 1
                throw SpoolError(.io, "injected read failure")
            }
            var records: [Record] = []
            var bytes = 0
            for record in state.records[Int(state.committed)...] {
                if records.count == maxCount || (!records.isEmpty && bytes + record.payload.count > maxBytes) { break }
                records.append(record)
                bytes += record.payload.count
            }
            return SourceBatch(records: records, end: records.last.map { $0.seq + 1 } ?? state.committed)
        }
    }

    func commit(upTo end: UInt64) async throws {
        try state.withLock { state in
            if state.commitFailures > 0 {
                state.commitFailures -= 1
                throw SpoolError(.io, "injected commit failure")
            }
            precondition(end >= state.committed && end <= UInt64(state.records.count), "bad commit \(end)")
            state.committed = end
            state.commits.append(end)
        }
    }

    /// How many observers are registered (a stopped worker must have cancelled its own).
    var observerCount: Int { state.withLock { $0.handlers.count } }

    func observeWrites(_ handler: @escaping @Sendable (UInt64) -> Void) -> WriteObservation {
        let id = state.withLock { state -> Int in
            state.nextHandlerID += 1
            state.handlers.append((state.nextHandlerID, handler))
            return state.nextHandlerID
        }
        return WriteObservation { [weak self] in self?.state.withLock { $0.handlers.removeAll { $0.id == id } } }
    }
}

/// A transport that answers from a script and keeps every request.
final class ScriptedUploader: Uploader {
    typealias Responder = @Sendable (UploadRequest, Int) async throws -> UploadResponse
    private let requests = Mutex<[UploadRequest]>([])
    private let responder: Responder

    /// - Parameter responder: answers a request, given its index among all requests.
    init(_ responder: @escaping Responder = { _, _ in UploadResponse(status: 200) }) {
        self.responder = responder
    }

    var sent: [UploadRequest] { requests.withLock { $0 } }

    /// The `first` seq of every request, in order.
    var firstSeqs: [UInt64] { sent.map(\.batch.first) }

    func upload(_ request: UploadRequest) async throws -> UploadResponse {
        let index = requests.withLock { requests -> Int in
            requests.append(request)
            return requests.count - 1
        }
        return try await responder(request, index)
    }
}

/// Keeps dead-lettered records in memory.
final class MemoryDeadLetters: DeadLetterSink {
    private let stored = Mutex<[(Record, SyncError)]>([])
    var records: [Record] { stored.withLock { $0.map(\.0) } }
    var errors: [SyncError] { stored.withLock { $0.map(\.1) } }

    func store(_ records: [Record], refusedWith error: SyncError) async throws {
        stored.withLock { $0 += records.map { ($0, error) } }
    }
}

/// What ``eventually(_:polls:_:)`` throws when its condition never held.
struct ConditionNeverHeld: Error, CustomStringConvertible {
    let what: String
    var description: String { "timed out waiting for \(what)" }
}

/// Waits, polling every 2 ms, until `condition` holds; records an issue and throws (ending the
/// test, which would otherwise go on to wait for what never came) if it never does.
///
/// The bound counts polls, not seconds: 45,000 polls take at least 90 s, and a poll that waited
/// for a cooperative thread (the pool busy with other suites) does not count as time the
/// condition had to come true, so a starved pool cannot fail a test that would pass.
func eventually(
    _ what: String = "condition", polls limit: Int = 45_000,
    _ condition: @Sendable () async -> Bool
) async throws {
    var polls = 0
    while !(await condition()) {
        polls += 1
        if polls > limit {
            Issue.record("timed out waiting for \(what)")
            throw ConditionNeverHeld(what: what)
        }
        try await Task.sleep(for: .milliseconds(2))
    }
}

