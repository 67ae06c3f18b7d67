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
        case directory(LiveSegments, LogSnapshot)
        case log(EventLog, WriteObservation)
    }

    private let source: Source
    private let cursor: Mutex<LogCursor>
    private let handedOut: Atomic<UInt64>
    private let wakeup: Wakeup
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
        let snapshot = try LogSnapshot(directory: directory, configuration: configuration, logger: logger)
        let live = LiveSegments(snapshot: snapshot)
        do {
            wakeup = try Wakeup(watching: directory)
        } catch {
            snapshot.close()
            throw error
        }
        source = .directory(live, snapshot)
        let start = seq ?? snapshot.segments.first?.baseSeq ?? snapshot.endSeq
        handedOut = Atomic(start)
        cursor = Mutex(LogCursor(log: live, from: start))
    }

    fileprivate init(log: EventLog, from seq: UInt64) throws {
        let wakeup = try Wakeup(watching: nil)
        let observation = log.observeWrites { _ in wakeup.signal() }
        self.wakeup = wakeup
        source = .log(log, observation)
        handedOut = Atomic(seq)
        cursor = Mutex(LogCursor(log: log, from: seq))
    }

    deinit {
        switch source {
        case .directory(_, let snapshot): snapshot.close()
        case .log(_, let observation): observation.cancel()
        }
        wakeup.release()
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
            while !wakeup.isStopped {
                // Drained before reading: a write after this read wakes the wait below.
                wakeup.drain()
                while items.count < maxCount, let item = try cursor.next() { items.append(item) }
                if !items.isEmpty {
                    handedOut.store(cursor.position, ordering: .relaxed)
                    return items
                }
                if case .directory(let live, _) = source, try live.refresh() { continue }
                wakeup.wait()
            }
            return items
        }
    }

    /// Ends the follower: a waiting ``next()`` returns nil, and so does every later call.
    /// From any thread; calling it twice is harmless.
    public func stop() { wakeup.stop() }

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
                        try await withCheckedThrowingContinuation { continuation in
                            follower.queue.async { continuation.resume(with: Result { try follower.nextBatch() }) }
                        }
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

/// How a follower waits: a pipe that ``signal()`` and ``stop()`` write to, and on Linux an
/// inotify descriptor watching the log's directory (every change to a file in it: a write, a
/// new segment, a deletion).
final class Wakeup: Sendable {
    private let pipeRead: Int32
    private let pipeWrite: Int32
    private let inotify: Int32
    private let stopped = Atomic(false)
    private let closed = Mutex(false)

    init(watching directory: String?) throws {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw SpoolError.system("pipe", path: nil, Errno(rawValue: errno)) }
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        pipeRead = fds[0]
        pipeWrite = fds[1]
        #if os(Linux)
        if let directory {
            let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
            let events = UInt32(IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_CLOSE_WRITE)
            if fd >= 0 && inotify_add_watch(fd, directory, events) < 0 {
                close(fd)
                inotify = -1
            } else {
                inotify = fd  // -1 (out of inotify instances): polling instead
            }
        } else {
            inotify = -1
        }
        #else
        inotify = -1
        #endif
        polling = directory != nil && inotify < 0
    }

    /// Whether waits time out at ``LogFollower/pollInterval`` (no inotify for a directory).
    private let polling: Bool

    var isStopped: Bool { stopped.load(ordering: .acquiring) }

    /// Set by ``signal()``, cleared by ``drain()``: one byte in the pipe per wake-up, not one
    /// per write the writer makes while the follower reads.
    private let signalled = Atomic(false)

    /// Wakes a waiting follower (the in-process writer's observer, after each batch it writes).
    func signal() {
        guard !signalled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var byte: UInt8 = 1
        _ = write(pipeWrite, &byte, 1)  // a full pipe is already a pending wake-up
    }

    func stop() {
        stopped.store(true, ordering: .releasing)
        var byte: UInt8 = 1
        _ = write(pipeWrite, &byte, 1)  // always: a stop must wake a wait whatever was signalled
    }

    /// Empties both descriptors, so the next wait sleeps until something new happens.
    func drain() {
        // Cleared before the pipe is emptied: a signal after this writes a byte again.
        signalled.store(false, ordering: .releasing)
        withUnsafeTemporaryAllocation(byteCount: 4096, alignment: 8) { buffer in
            for fd in [pipeRead, inotify] where fd >= 0 {
                while read(fd, buffer.baseAddress, buffer.count) > 0 {}
            }
        }
    }

    /// Sleeps until a signal, a change in the directory, or the recheck interval.
    func wait() {
        let interval = polling ? LogFollower.pollInterval : LogFollower.idleRecheck
        let milliseconds = Int32(interval.wholeNanoseconds / 1_000_000)
        var fds = [pollfd(fd: pipeRead, events: Int16(POLLIN), revents: 0)]
        if inotify >= 0 { fds.append(pollfd(fd: inotify, events: Int16(POLLIN), revents: 0)) }
        _ = poll(&fds, nfds_t(fds.count), milliseconds)
    }

    func release() {
        closed.withLock { closed in
            guard !closed else { return }
            closed = true
            for fd in [pipeRead, pipeWrite, inotify] where fd >= 0 { _ = close(fd) }
        }
    }
}
