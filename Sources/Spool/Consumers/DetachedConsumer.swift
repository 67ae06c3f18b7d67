import Foundation
import Logging
import Synchronization

/// A consumer of a log that another process writes: a sidecar (`spool sync --sidecar`, an
/// agent that ships what an app appends), or any reader that commits while the writer runs.
///
/// It never takes the writer's lock, so the writer opens, appends and closes beside it, and it
/// works as well when no writer is running. What it shares with the writer:
/// - **The offset file** (`consumers/<name>.offset`), which only this consumer writes, with
///   durable commits only. One committer per consumer: it holds `consumers/<name>.lock` (a
///   second one, in any process, a ``Consumer`` of the writer's included, gets `.locked`).
/// - **Retention.** The writer reads the offset files of consumers it did not make when it
///   decides what to delete (after each segment it seals, and after its own consumers'
///   commits), so what this consumer has not committed is never deleted by retention. The cap
///   (`dropOldest`) may still drop it, as it would for the writer's own consumers: those
///   records read as a *dropped* notice.
/// - **Durability.** Like ``Consumer``, it hands out only durable records: before a read
///   returns, it `fdatasync`s the segment files its records are in (the writer may have
///   written them without syncing; the sync of one process makes the file's data durable for
///   all), so a commit never passes data a power loss could take back.
///
/// It reads what is whole on disk, as a ``LogFollower`` does (FORMAT.md §6.1). A new consumer
/// (`creating`) starts at the oldest stored record; if the writer's retention deletes that
/// segment in the instant before the offset file appears, the first read reports it *dropped*.
/// Expiry (`maxAge`, `reportingDeadline`) follows the `configuration` given here.
///
/// It shares everything but its side with ``Consumer`` (one committer): what differs is that
/// its segment list comes from what is whole on disk (`LiveSegments`) and that it makes records
/// durable itself. Commits are always durable (a `.fast` one is made durable too: the writer's
/// retention trusts the offset file).
///
/// Thread-safety: every method may be called from any thread; calls are serialised.
public final class DetachedConsumer: LogConsumer, @unchecked Sendable {
    /// The consumer's name.
    public let name: String
    /// The log's directory.
    public let directory: String
    /// The log's identity.
    public let logID: LogID
    /// The ids the log's records are sent under, as its `EPOCHS` file said at open (FORMAT.md
    /// §13): an epoch the writer starts later (its directory opened elsewhere) is not seen.
    public let epochs: LogEpochs
    /// The configuration given at open: its keys, expiry rules and file modes.
    public let configuration: Configuration

    private let live: LiveSegments
    private let committer: Committer

    /// Opens the consumer `name` of the log in `directory`, beside whatever process writes it.
    /// - Parameters:
    ///   - directory: the log's directory; it must hold a log.
    ///   - name: the consumer; 1 to 64 characters from `A-Z a-z 0-9 . _ -`.
    ///   - creating: make the consumer (at the oldest stored record) if it does not exist.
    ///   - configuration: its encryption keys (to read encrypted blocks), expiry rules, and
    ///     file modes are used.
    ///   - logger: where opening logs what recovery would repair, never payloads.
    /// - Throws: ``SpoolError`` `.invalidConsumerName`; `.invalidArgument` if the consumer does
    ///   not exist and `creating` is false; `.locked` if another committer has it;
    ///   `.corrupt` if its offset file has no valid slot (a writing open repairs it); `.io` if
    ///   the directory's watch cannot be set up; what
    ///   ``LogSnapshot/init(directory:configuration:logger:)`` throws.
    public init(directory: String, name: String, creating: Bool = false, configuration: Configuration = Configuration(),
                logger: Logger = Logger(label: "spool")) throws {
        try Consumers.validate(name)
        self.name = name
        self.directory = directory
        self.configuration = configuration
        live = try LiveSegments(directory: directory, configuration: configuration, logger: logger)
        logID = live.id
        epochs = try LogEpochs.load(directory: directory, base: live.id)
        committer = try Committer(name: name, directory: directory, configuration: configuration, creating: creating, log: live)
    }

    deinit { close() }

    /// Releases the consumer (its lock, so another committer may take it), and ends
    /// ``waitForChange()`` and every watch. Calls after it throw `.closed`. Closing twice is
    /// harmless.
    public func close() {
        live.stop()
        committer.close()
    }

    /// The committed offset: the seq of the next record to deliver.
    public var committed: UInt64 { committer.committed }

    /// Records written past the committed offset, as of the last look at the log (no I/O).
    public var pendingRecords: UInt64 {
        let end = live.end
        let from = committed
        return end > from ? end - from : 0
    }

    /// The next batch from the committed offset, as a ``Consumer`` reads it
    /// (``LogConsumer/read(maxCount:maxBytes:)``): when the batch has room it looks at the log
    /// again, and it `fdatasync`s the segment files holding its records before returning.
    /// - Throws: `.invalidArgument` for a count or size below 1; `.io` if a file cannot be read
    ///   or synced; `.closed` once closed.
    public func read(maxCount: Int = 50, maxBytes: Int = 512 * 1024) throws -> ConsumerBatch { try committer.read(maxCount: maxCount, maxBytes: maxBytes) }

    /// Moves the committed offset to `end`, durably whatever `mode` says
    /// (``LogConsumer/commit(upTo:mode:)``): the data below it first (this consumer syncs what
    /// it did not read), then the offset. The writer's retention may then delete what every
    /// consumer has passed.
    /// - Throws: `.invalidCommit` if `end` is below the committed offset or past the last
    ///   written record; `.io`/`.diskFull` if a file cannot be synced or written (the offset on
    ///   disk is then the previous one); `.closed` once closed.
    public func commit(upTo end: UInt64, mode: CommitMode) throws { try committer.commit(upTo: end, mode: mode) }

    /// Blocks until the log has changed since the last look (a read with room left looks
    /// again): records written, a segment added or deleted. Returns at once if it already has;
    /// returns when the consumer is closed. Blocking: call it from a thread of your own.
    /// - Throws: `.io` if the directory cannot be listed or a segment read.
    public func waitForChange() throws {
        _ = try live.waitForChange(past: live.end)
    }

    /// Calls `handler` with the seq past the last whole record each time the log grows (woken
    /// as ``waitForChange()`` is), on a thread of its own, until the registration is cancelled
    /// or the consumer closed. A look that fails is tried again at the next wake-up.
    public func watchWrites(_ handler: @escaping @Sendable (UInt64) -> Void) throws -> WriteObservation {
        let live = self.live
        let cancellation = Cancellation()
        let thread = Thread {
            var last = live.end
            while !live.isStopped && !cancellation.isCancelled {
                do {
                    guard let end = try live.waitForChange(past: last, unless: { cancellation.isCancelled }) else { break }
                    last = end
                    handler(end)
                } catch {
                    live.pause()  // a look that failed (a segment deleted mid-look): again at the next wake-up
                }
            }
        }
        thread.name = "spool-detached-watch"
        thread.start()
        return WriteObservation {
            cancellation.cancel()
            live.wake()
        }
    }
}

/// Set once by a ``WriteObservation``'s cancel, read by the watch thread at each wake-up.
private final class Cancellation: Sendable {
    private let cancelled = Atomic(false)
    var isCancelled: Bool { cancelled.load(ordering: .acquiring) }
    func cancel() { cancelled.store(true, ordering: .releasing) }
}
