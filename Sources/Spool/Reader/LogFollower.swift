import Dispatch
import SystemPackage
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Follows a log as it is written: every record from a seq on, in order, waiting for new ones
/// when it reaches the end, like `tail -f` or a Kafka consumer. `spool dump --follow` is one.
///
/// Two ways to make one:
/// - ``init(directory:from:configuration:logger:)`` follows a log that another process
///   writes (or that no process has open yet): it reads what is whole on disk (FORMAT.md §6.1)
///   and, on Linux, is woken by inotify when a file of the directory changes, with a look
///   every ``idleRecheck`` besides; elsewhere it looks every ``pollInterval``. Idle, it costs
///   a wake-up per recheck, nothing per record.
/// - ``EventLog/follow(from:)`` follows a log this process writes: the writer wakes it after
///   each batch it writes.
///
/// Either way it hands out what the writer has *written* (survives the writer's SIGKILL), not
/// only what is durable: a power loss can take back records a follower has already seen, as
/// it can from `tail -f`. A consumer (``Consumer``) is handed only durable records.
///
/// Across segment rolls, writer restarts (a SIGKILLed writer's torn tail is never read: the
/// follower stops at the last whole block) and retention (a segment deleted before the
/// follower got to it reads as a *dropped* notice), records come in seq order, none twice.
///
/// Use ``next()`` from a thread of your own, or ``items`` (an `AsyncSequence`) from async code;
/// ``stop()``, from any thread, ends both. Blocking file I/O and waits run on a private
/// dispatch queue, never on Swift's cooperative pool.
public final class LogFollower: Sendable {
    /// How often a follower on Linux looks at the log when inotify reported nothing (a
    /// safety net: file systems that do not report changes, such as NFS).
    public static let idleRecheck: Duration = .seconds(1)
    /// How often a follower looks at the log where inotify is missing.
    public static let pollInterval: Duration = .milliseconds(10)

    private enum Source: Sendable {
        /// Another process's log: the live view owns its wake-up (inotify, or polling).
        case directory(LiveSegments)
        /// This process's log: the writer signals the wake-up after each batch it writes.
        case log(EventLog, WriteObservation, Wakeup)
    }

    private let source: Source
    private let cursor: RankedMutex<LogCursor>
    private let handedOut: Atomic<UInt64>
    private let queue = DispatchQueue(label: "spool-follower")

    /// Follows the log in `directory`, written by another process or by none yet.
    /// - Parameters:
    ///   - directory: the log's directory; it must hold a log (a follower creates none).
    ///   - seq: the first seq to hand out; nil for the oldest stored record.
    ///   - configuration: only its `encryption` keys are used, to read encrypted blocks.
    ///   - logger: where opening logs what recovery would repair, never payloads.
    /// - Throws: what ``LogSnapshot/init(directory:configuration:logger:)`` throws; `.io` if
    ///   the wake-up cannot be set up (file descriptors exhausted).
    public init(directory: String, from seq: UInt64? = nil, configuration: Configuration = Configuration(),
                logger: Logger = Logger(label: "spool")) throws {
        let live = try LiveSegments(directory: directory, configuration: configuration, logger: logger)
        source = .directory(live)
        let start = seq ?? live.firstSeq
        handedOut = Atomic(start)
        cursor = RankedMutex(.followerCursor, LogCursor(log: live, from: start))
    }

    fileprivate init(log: EventLog, from seq: UInt64) throws {
        let wakeup = try Wakeup(watching: nil)
        let observation = log.observeWrites { _ in wakeup.signal() }
        source = .log(log, observation, wakeup)
        handedOut = Atomic(seq)
        cursor = RankedMutex(.followerCursor, LogCursor(log: log, from: seq))
    }

    deinit {
        switch source {
        case .directory: break  // the live view closes its snapshot and wake-up as it goes
        case .log(_, let observation, let wakeup):
            observation.cancel()
            wakeup.release()
        }
    }

    /// The seq of the next record to hand out (past the last batch returned; read without
    /// waiting for a ``next()`` that is waiting).
    public var position: UInt64 { handedOut.load(ordering: .relaxed) }

    /// The next record or notice, waiting as long as it takes for one; nil once ``stop()``
    /// was called. Blocking: call it from a thread of your own, or use ``items``.
    /// - Throws: what ``LogReader/next()`` throws (a missing key or dictionary: the follower
    ///   stays on that block, so a retry once it is back goes on).
    public func next() throws -> ReadItem? {
        try nextBatch(maxCount: 1).first
    }

    /// Up to `maxCount` records and notices, waiting until there is at least one; empty once
    /// ``stop()`` was called.
    public func nextBatch(maxCount: Int = 1024) throws -> [ReadItem] {
        try cursor.withLock { cursor in
            var items = [ReadItem]()
            while !isStopped {
                // What was readable before this read: a change after it ends the wait below.
                var seen: UInt64 = 0
                switch source {
                case .directory(let live): seen = live.end
                case .log(_, _, let wakeup): wakeup.drain()
                }
                while items.count < maxCount, let item = try cursor.next() { items.append(item) }
                if !items.isEmpty {
                    handedOut.store(cursor.position, ordering: .relaxed)
                    return items
                }
                switch source {
                case .directory(let live): _ = try live.waitForChange(past: seen)
                case .log(_, _, let wakeup): wakeup.wait()
                }
            }
            return items
        }
    }

    private var isStopped: Bool {
        switch source {
        case .directory(let live): live.isStopped
        case .log(_, _, let wakeup): wakeup.isStopped
        }
    }

    /// Ends the follower: a waiting ``next()`` returns nil, and so does every later call.
    /// From any thread; calling it twice is harmless.
    public func stop() {
        switch source {
        case .directory(let live): live.stop()
        case .log(_, _, let wakeup): wakeup.stop()
        }
    }

    /// The records and notices, as an `AsyncSequence` that waits for new ones and ends when
    /// ``stop()`` is called. Cancelling the task that iterates stops the follower.
    public var items: Items { Items(follower: self) }

    /// ``LogFollower/items``: reads in batches on the follower's queue.
    public struct Items: AsyncSequence, Sendable {
        /// A record, or a notice for records that cannot be handed out (dropped, corrupt, missing).
        public typealias Element = ReadItem
        let follower: LogFollower

        /// An iterator over the follower's items; iterate from one task at a time.
        public func makeAsyncIterator() -> Iterator { Iterator(follower: follower) }

        /// Hands out one batch's items, then waits for the next batch off the cooperative pool.
        public struct Iterator: AsyncIteratorProtocol {
            let follower: LogFollower
            var buffer: [ReadItem] = []
            var index = 0

            /// The next item; nil once the follower is stopped or the task cancelled.
            public mutating func next() async throws -> ReadItem? {
                if index == buffer.count {
                    let follower = follower
                    buffer = try await withTaskCancellationHandler {
                        try await offload(on: follower.queue) { try follower.nextBatch() }
                    } onCancel: {
                        follower.stop()
                    }
                    index = 0
                    if buffer.isEmpty { return nil }
                }
                defer { index += 1 }
                return buffer[index]
            }
        }
    }
}

extension EventLog {
    /// A follower of this log, handing out records as the writer writes them (it wakes the
    /// follower after each batch), from `seq` (the oldest stored record if nil).
    /// - Throws: `.io` if the wake-up cannot be set up (file descriptors exhausted).
    public func follow(from seq: UInt64? = nil) throws -> LogFollower {
        try LogFollower(log: self, from: seq ?? firstSeq)
    }
}
