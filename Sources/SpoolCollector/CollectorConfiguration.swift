#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Spool

/// Every setting of a ``Collector``, in one `Sendable` value with documented defaults.
///
/// The configuration is validated once, by ``Collector/start()``; an invalid value is refused
/// with ``SpoolError/Code/invalidConfiguration`` and a message that names the field.
public struct CollectorConfiguration: Sendable {
    /// The address to listen on. The default is `"127.0.0.1"` (loopback only).
    public var host: String = "127.0.0.1"
    /// The TCP port to listen on. The default is 0: the system picks a free port, which
    /// ``Collector/start()`` returns.
    public var port: Int = 0
    /// A file that receives every unique record as one NDJSON line (`id`, `seq`, `time`, `data`,
    /// or `data_base64` for a record sent that way: its exact bytes in standard base64),
    /// created with mode 0600 if missing and appended to otherwise. The default is `nil` (no file).
    public var outputPath: String? = nil
    /// A Spool log directory (created, mode 0700, if missing) that receives every unique record
    /// as an ``OriginRecord`` (FORMAT.md §11), durably before the answer: a batch is answered
    /// 200 only once its records are synced (`fdatasync`, shared by the requests in flight:
    /// group commit), so a crash after a 200 loses nothing. A log that cannot be written (a
    /// full disk, a failed sync) answers 503 with `Retry-After: 1`, never 200. The directory is
    /// marked (`ORIGINS`) so `spool sync` forwards each record with its origin id; a directory
    /// whose log holds other records, or that is world-writable, is refused at
    /// ``Collector/start()``, and one that is group-writable or another user's is warned
    /// about (refused with ``strictPermissions``). The default is `nil` (no log).
    public var logDirectory: String? = nil
    /// The settings of the log in ``logDirectory``. The default is Spool's, with
    /// `maxRecordSize` raised to 64 MiB (the largest record a log holds; a larger one is
    /// answered 413) and `maxPendingBytes` to 128 MiB to match.
    public var logConfiguration: Configuration = {
        var configuration = Configuration()
        configuration.maxRecordSize = 64 * 1024 * 1024
        configuration.maxPendingBytes = 128 * 1024 * 1024
        return configuration
    }()
    /// A file of the bearer tokens the collector accepts: one per line, each line ended by a
    /// newline, `#` starting a comment that runs to the end of the line, blank lines ignored; a
    /// token has at least 16 bytes. With it, every `POST` without
    /// `Authorization: Bearer <a token of the file>` is answered 401 (compared in constant time;
    /// a token never appears in a log or an answer). The file is re-read when it changes
    /// (checked every ``authTokenCheckInterval``) and on ``Collector/reloadAuthTokens()``
    /// (`spool collector` calls it on SIGHUP); a re-read that fails (a bad line, a last line
    /// without its newline: the file is being written; an empty file) keeps the tokens in
    /// force. A file whose only token line is `!revoke-all` revokes every token. A line may
    /// bind its token to log ids (`<token> <log id> <log id>…`): a batch holding a record of
    /// another log id (its `Spool-Batch` log or a record's origin) is then answered 403. A file its
    /// group or others may read or write is warned about at each read (see
    /// ``strictPermissions``). The default is `nil`: every request is accepted.
    public var authTokenFile: String? = nil
    /// Refuse, rather than warn about, an ``authTokenFile`` its group or others may read or
    /// write, and a ``logDirectory`` that is group-writable or another user's (a world-writable
    /// one is always refused). ``Collector/start()`` then throws, and a re-read of such a token
    /// file fails (the tokens in force stay). The default is `false`.
    public var strictPermissions: Bool = false
    /// How often the ``authTokenFile`` is checked for a change (its size, times and inode).
    /// The default is 1 second. Range: 10 ms ... 1 hour.
    public var authTokenCheckInterval: Duration = .seconds(1)
    /// The largest request body accepted, as sent (before decompression); larger bodies are
    /// answered 413, at once, before any of the body is read, when their `Content-Length`
    /// declares more. The default is 16 MiB.
    public var maxBodyBytes: Int = 16 * 1024 * 1024
    /// The largest body accepted after decompression; decompression stops there and the
    /// request is answered 413, so a compression bomb costs at most this much memory.
    /// The default is 64 MiB.
    public var maxDecodedBytes: Int = 64 * 1024 * 1024
    /// The largest record accepted, in bytes (its own bytes: the JSON text, text or decoded
    /// base64 it stands for). A batch holding a larger one is answered 413 with a body naming
    /// the record and the limit, so the sender splits it and dead-letters the record alone:
    /// a collector must not store what its log or a forwarder cannot carry on (a Spool log
    /// holds records up to `Configuration.maxRecordSize`; Pub/Sub takes 10 MB messages; a
    /// collector's bodies are ``maxBodyBytes``). The default is Spool's record limit,
    /// `Configuration().maxRecordSize` (1 MiB). With ``logDirectory``, it must leave room for
    /// the origin record's header within `logConfiguration.maxRecordSize`.
    public var maxRecordBytes: Int = Configuration().maxRecordSize
    /// The most requests handled at once once their bodies have arrived (decompressed,
    /// decoded, recorded); one more is answered 503 without `Retry-After` (the sync worker
    /// retries it on its own, and lowers its concurrency once such answers are a share of
    /// its requests). Each may hold ``maxBodyBytes`` plus ``maxDecodedBytes``,
    /// so this bounds the memory of a burst. A body still arriving holds no slot: the bodies
    /// being read share a budget of this many times ``maxBodyBytes`` bytes, each holding the
    /// bytes it has sent so far, never the length it declared (a body whose next bytes would
    /// pass the budget is answered 503 too), so slow senders, which hold few bytes, cannot
    /// lock everyone else out, and ``minBodyBytesPerSecond`` ends them. Every answer but the
    /// health probes' says it (`Spool-Max-Concurrent-Requests`), so that senders grow on these refusals rather than
    /// hold on the collector's queue. The default is 4 per processor.
    public var maxConcurrentRequests: Int = 4 * ProcessInfo.processInfo.activeProcessorCount
    /// The longest a request's head may take to arrive, counted from when the connection
    /// opens and from the end of each answer; past it the connection is closed, so a client
    /// trickling header bytes (slowloris) or an idle keep-alive connection holds a socket for
    /// this long at most. A head larger than NIO's parser takes (80 KiB) is answered 431. The
    /// default is 10 seconds. Range: above 0, at most 1 hour.
    public var headerTimeout: Duration = .seconds(10)
    /// The longest a request's body may take to arrive, counted from when its handler starts
    /// reading it; a slower one is answered 408, so a body that keeps trickling is bounded
    /// (it holds no ``maxConcurrentRequests`` slot meanwhile, only its bytes). A connection that
    /// sends nothing for twice this long, and at least this plus 60 s, is closed; one still
    /// owing more than 64 KiB of a body after its 408 is closed once the answer is out, one
    /// owing less after ``headerTimeout``. The default is 30
    /// seconds. Range: above 0, at most 1 hour.
    public var bodyTimeout: Duration = .seconds(30)
    /// The longest a request's body may go without a byte arriving (counted from when its
    /// handler starts reading it, then from each piece): a body that stalls is answered 408
    /// this soon, so a stalled sender frees its connection and its share of the body budget
    /// in seconds instead of holding them for all of ``bodyTimeout``, which still bounds a
    /// body that keeps trickling. The default is 5 seconds. Range: above 0, at most 1 hour.
    public var bodyReadTimeout: Duration = .seconds(5)
    /// The slowest a request's body may arrive, in bytes per second, after a grace of
    /// ``bodyReadTimeout``: a body of which fewer than this rate times (the time since its
    /// handler started reading it minus ``bodyReadTimeout``) bytes have arrived is answered 408,
    /// so a sender that keeps a body alive with a byte now and then (under ``bodyReadTimeout``
    /// between bytes) frees its connection in seconds rather than after all of ``bodyTimeout``
    /// (as Apache's `mod_reqtimeout` `MinRate`, and nginx's `client_body_timeout` between
    /// reads). The default is 1024 (1 KiB/s; a one-record batch arrives in one piece, a 16 MiB
    /// body within ``bodyTimeout`` needs 560 KiB/s anyway). Range: 1 ... 1 GiB per second.
    public var minBodyBytesPerSecond: Int = 1024

    /// How long a connection may send nothing before it is closed: see ``bodyTimeout``.
    /// The margin is wide because the 408 is answered from Swift's cooperative pool, which a
    /// busy process (a test run blocking it) can delay, while the idle timer runs on NIO's
    /// event loop: the 408 must come first. A connection with no request in hand (idle
    /// between requests, or still sending at most 64 KiB of a body after its answer) closes
    /// sooner, after ``headerTimeout`` without a new request head.
    var connectionIdleTimeout: Duration { bodyTimeout + max(bodyTimeout, .seconds(60)) }
    /// How many logs (by log id) the duplicate tracking remembers. Past it, the least recently
    /// seen tenth is forgotten (counted in ``CollectorStats/forgottenLogs`` and logged at
    /// warning), so memory stays bounded whatever number of log ids clients send; a batch a
    /// forgotten log re-sends is recorded again. The default is 10,000 (a few MB).
    public var maxTrackedLogs: Int = 10_000
    /// Keep every unique record in memory for ``Collector/records()``. The default is `true`;
    /// long benchmarks turn it off to keep memory flat (counts and the output file still work).
    public var retainsRecords: Bool = true
    /// How long ``Collector/stop()`` lets requests in flight finish before it closes their
    /// connections. The default is 5 seconds.
    public var shutdownGracePeriod: Duration = .seconds(5)
    /// Failures to inject. The default injects none.
    public var faults: FaultConfiguration = .none
    /// The seed of the fault-injection random sequence: the same seed and the same request
    /// order give the same faults. The default is 0.
    public var seed: UInt64 = 0

    public init() {}

    /// Checks every field, naming the first that is out of range.
    public func validate() throws {
        func fail(_ field: String, _ why: String) -> SpoolError {
            SpoolError(.invalidConfiguration, "CollectorConfiguration.\(field) \(why)")
        }
        guard !host.isEmpty else { throw fail("host", "is empty") }
        guard (0...65535).contains(port) else { throw fail("port", "is \(port); it must be between 0 and 65535") }
        if let outputPath, outputPath.isEmpty { throw fail("outputPath", "is empty; use nil for no file") }
        if let logDirectory, logDirectory.isEmpty { throw fail("logDirectory", "is empty; use nil for no log") }
        if let authTokenFile, authTokenFile.isEmpty { throw fail("authTokenFile", "is empty; use nil for no authentication") }
        guard authTokenCheckInterval >= .milliseconds(10), authTokenCheckInterval <= .seconds(3600) else {
            throw fail("authTokenCheckInterval", "is \(authTokenCheckInterval); it must be between 10 ms and 1 hour")
        }
        if logDirectory != nil {
            do {
                try logConfiguration.validate()
            } catch {
                throw fail("logConfiguration", "is invalid: \(error)")
            }
        }
        guard maxBodyBytes > 0 else { throw fail("maxBodyBytes", "is \(maxBodyBytes); it must be positive") }
        guard maxDecodedBytes > 0 else { throw fail("maxDecodedBytes", "is \(maxDecodedBytes); it must be positive") }
        guard maxRecordBytes > 0 else { throw fail("maxRecordBytes", "is \(maxRecordBytes); it must be positive") }
        if logDirectory != nil, maxRecordBytes > logConfiguration.maxRecordSize - OriginRecord.headerSize {
            throw fail("maxRecordBytes", "is \(maxRecordBytes); the log holds records of at most \(logConfiguration.maxRecordSize) bytes, \(OriginRecord.headerSize) of them the origin header")
        }
        guard maxTrackedLogs > 0 else { throw fail("maxTrackedLogs", "is \(maxTrackedLogs); it must be positive") }
        guard maxConcurrentRequests > 0 else {
            throw fail("maxConcurrentRequests", "is \(maxConcurrentRequests); it must be positive")
        }
        guard bodyTimeout > .zero, bodyTimeout <= .seconds(3600) else {
            throw fail("bodyTimeout", "is \(bodyTimeout); it must be positive and at most 1 hour")
        }
        guard headerTimeout > .zero, headerTimeout <= .seconds(3600) else {
            throw fail("headerTimeout", "is \(headerTimeout); it must be positive and at most 1 hour")
        }
        guard bodyReadTimeout > .zero, bodyReadTimeout <= .seconds(3600) else {
            throw fail("bodyReadTimeout", "is \(bodyReadTimeout); it must be positive and at most 1 hour")
        }
        guard minBodyBytesPerSecond > 0, minBodyBytesPerSecond <= 1 << 30 else {
            throw fail("minBodyBytesPerSecond", "is \(minBodyBytesPerSecond); it must be between 1 and 1 GiB (1073741824) per second")
        }
        guard shutdownGracePeriod >= .zero else {
            throw fail("shutdownGracePeriod", "is \(shutdownGracePeriod); it must not be negative")
        }
        try faults.validate()
    }
}
