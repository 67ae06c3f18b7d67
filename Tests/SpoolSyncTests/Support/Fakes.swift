import Testing
import Spool
import Synchronization
@testable import SpoolSync

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

    /// The damaged ranges recorded, with the consumer's committed offset when each was (read
    /// through `committed`, if set).
    private let damage = Mutex<[(range: DamagedRange, committed: UInt64?)]>([])
    var damaged: [(range: DamagedRange, committed: UInt64?)] { damage.withLock { $0 } }
    nonisolated(unsafe) var committed: (() -> UInt64)?

    func recordDamage(_ ranges: [DamagedRange], consumer: String) async throws {
        let offset = committed?()
        damage.withLock { $0 += ranges.map { ($0, offset) } }
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

