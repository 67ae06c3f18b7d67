/// Every setting of a ``SyncWorker``, in one `Sendable` value with documented defaults.
///
/// The defaults follow Sensors Analytics' flush (100 records or every 15 s, a 5 s floor,
/// 50 records per request, a 30 s request timeout). The configuration is validated once,
/// when the worker is made; ``validate()`` names the first bad field.
public struct SyncConfiguration: Sendable {
    // MARK: Dispatch policies

    /// A flush starts when this many records are pending for the consumer. The default is 100.
    /// Range: 1 ... 1,000,000.
    public var flushCount: Int = 100
    /// A flush starts every `flushInterval` while the worker runs; a value ≤ 0 disables
    /// periodic flushing (manual and count-triggered flushes only). Values below
    /// ``minimumFlushInterval`` are raised to it. The default is 15 s.
    public var flushInterval: Duration = .seconds(15)
    /// The floor of ``flushInterval``. The default is 5 s. Range: 1 ms ... 1 day.
    public var minimumFlushInterval: Duration = .seconds(5)

    // MARK: Batches

    /// The most records in one request. The default is 50. Range: 1 ... 100,000.
    public var maxBatchCount: Int = 50
    /// The most bytes of encoded (uncompressed) body in one request; a single record larger
    /// than this is sent alone. The default is 512 KiB. Range: 1 KiB ... 256 MiB.
    public var maxBatchBytes: Int = 512 * 1024

    // MARK: Requests

    /// How many requests may be in flight at once for one consumer.
    public enum Concurrency: Sendable, Equatable {
        /// Exactly this many (at most: fewer when fewer batches are pending). `fixed(1)` is
        /// strict order: the server sees batches one after the other, in seq order.
        case fixed(Int)
        /// Starts at 1 and adapts to the server, up to `max`: twice as many after each round
        /// trip in which every slot was used and the server answered without a sign of strain
        /// (a fast start) until the first sign, then one more; never more after a failure of
        /// any kind; half as many after an overload (``SyncError/overloaded``: HTTP's 429 or
        /// 503, PostgreSQL's `too_many_connections`, a timeout), a tenth fewer when the round
        /// trip rises above its moving average (AIMD, as Vector's adaptive request
        /// concurrency), and past the level of the last strain only now and then.
        case adaptive(max: Int)

        /// The most requests in flight this setting ever allows.
        public var maximum: Int {
            switch self {
            case .fixed(let count): count
            case .adaptive(let max): max
            }
        }

        /// The same setting allowing at most `limit` requests in flight (a sink's own limit).
        public func bounded(by limit: Int) -> Concurrency {
            switch self {
            case .fixed(let count): .fixed(min(count, max(limit, 1)))
            case .adaptive(let most): .adaptive(max: min(most, max(limit, 1)))
            }
        }
    }

    /// Requests in flight at once, through a sliding window: a slot freed by an answer is
    /// refilled at once with the next batch, and answers come in any order; the offset moves
    /// only through the longest prefix the server accepted, so nothing past an unanswered or
    /// failed batch is ever committed. With more than one, a server may see a consumer's
    /// batches out of order (never a gap in what is committed): the `Spool-Batch` header
    /// (`<log id>:<first seq>-<last seq>`) orders them.
    /// The default is `.fixed(1)`, the order a mobile app's server expects; `spool sync`
    /// defaults to `.adaptive(max: 32)`. Range: 1 ... 64.
    public var concurrency: Concurrency = .fixed(1)
    /// The most payload bytes of records read and not yet committed: the window behind a slow
    /// or failing batch. When a batch at the head of the window holds the commit back (slow to
    /// answer, or failed and waiting for its retry) and this much is read behind it, nothing
    /// more is read or sent: the requests in flight go on, and sending resumes as soon as the
    /// head is answered and committed. The window always holds at least one batch, whatever
    /// this says. The default is 64 MiB. Range: 1 KiB ... 1 GiB.
    public var maxWindowBytes: Int = 64 * 1024 * 1024
    /// Whether the request holding the commit back is sent once more when it has been out
    /// longer than 95% of the recent round trips (a hedged request, as in "The Tail at
    /// Scale"): the first copy accepted settles the batch, the other runs on to its answer,
    /// which is ignored. Hedges stay under 5% of the requests (``SyncStats/hedges``), and take a
    /// slot of ``concurrency`` like any request. Every record carries its id, so a copy is
    /// harmless where repeats are dropped; turn it off where a copy costs. Never with at most
    /// one request in flight (`.fixed(1)`, or a sink's ``SyncSink/maxInFlight`` of 1): a copy
    /// needs a second request, and `.fixed(1)` means the server sees one request at a time.
    /// The default is `true`.
    public var hedging: Bool = true

    /// How long one request may take before it counts as a timeout and is retried.
    /// The default is 30 s. Range: 1 ms ... 10 min.
    public var requestTimeout: Duration = .seconds(30)
    /// A flush with a deadline starts no request when less than this (or `requestTimeout`,
    /// if shorter) remains before it; a request that starts is cut to the time left. 1 s.
    public static let minimumRequestTime: Duration = .seconds(1)

    // MARK: Failures

    /// The exponential backoff between retries. The default is ``Backoff/init()``
    /// (100 ms doubling to 60 s, full jitter).
    public var backoff: Backoff = .init()

    // MARK: HTTP

    /// The settings of the ``HTTPSink`` a worker given an uploader (rather than a sink) posts
    /// through: encoding, compression, headers, retryable statuses. No other sink reads them.
    /// The default is ``HTTPSink/Configuration/init()``.
    public var http = HTTPSink.Configuration()

    // MARK: Dead letters

    /// Whether refused records are written to the dead-letter log. When `false` they are only
    /// counted and logged, then skipped. The default is `true`.
    public var deadLetterEnabled: Bool = true

    // MARK: Damage

    /// What the worker does with a range of records the log cannot read (damaged bytes).
    public enum DamagePolicy: String, Sendable, CaseIterable {
        /// Record the range (``DeadLetterSink/recordDamage(_:consumer:)``), log it at error
        /// level, count it (``SyncStats/damaged``), report it (``BatchResult/damaged(_:)``),
        /// and commit past it: the queue never stalls on damage.
        case skip
        /// Commit up to the range and stop there (``SyncError/Code/damaged``), for users who
        /// prefer to stop and repair: nothing past its first record is committed.
        case stop
    }

    /// What the worker does with damaged records. The default is ``DamagePolicy/skip``.
    public var onDamage: DamagePolicy = .skip

    /// The defaults, as documented on each setting.
    public init() {}

    /// ``flushInterval`` after the floor: `nil` when periodic flushing is disabled.
    public var effectiveFlushInterval: Duration? {
        flushInterval <= .zero ? nil : max(flushInterval, minimumFlushInterval)
    }

    /// Checks every field, throwing ``SyncError/Code/invalidConfiguration`` with a message
    /// that names the first one out of range.
    public func validate() throws(SyncError) {
        func fail(_ field: String, _ why: String) -> SyncError {
            SyncError(.invalidConfiguration, "SyncConfiguration.\(field) \(why)")
        }
        guard (1...1_000_000).contains(flushCount) else {
            throw fail("flushCount", "is \(flushCount); it must be between 1 and 1,000,000")
        }
        guard minimumFlushInterval >= .milliseconds(1), minimumFlushInterval <= .seconds(86_400) else {
            throw fail("minimumFlushInterval", "is \(minimumFlushInterval); it must be between 1 ms and 1 day")
        }
        guard (1...100_000).contains(maxBatchCount) else {
            throw fail("maxBatchCount", "is \(maxBatchCount); it must be between 1 and 100,000")
        }
        guard (1024...256 * 1024 * 1024).contains(maxBatchBytes) else {
            throw fail("maxBatchBytes", "is \(maxBatchBytes); it must be between 1 KiB and 256 MiB")
        }
        guard requestTimeout >= .milliseconds(1), requestTimeout <= .seconds(600) else {
            throw fail("requestTimeout", "is \(requestTimeout); it must be between 1 ms and 10 minutes")
        }
        guard (1024...1024 * 1024 * 1024).contains(maxWindowBytes) else {
            throw fail("maxWindowBytes", "is \(maxWindowBytes); it must be between 1 KiB and 1 GiB")
        }
        guard (1...64).contains(concurrency.maximum) else {
            throw fail("concurrency", "allows \(concurrency.maximum) requests in flight; it must be between 1 and 64")
        }
        try http.validate(as: "SyncConfiguration.http")
        try backoff.validate()
    }
}
