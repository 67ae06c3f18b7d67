import Spool

/// A destination of the sync worker: turns records into its own requests, and its answers
/// into the outcomes the worker's state machine knows.
///
/// The worker owns every policy — reading, batching limits, concurrency, retries and backoff,
/// `Retry-After`, expiry, splitting, dead letters, committing, metrics — and never learns a
/// destination's name. A sink owns only what is the destination's own: how many records one
/// request can carry, how a request is encoded, how it is sent, and what an answer means.
/// ``HTTPSink`` posts Spool's envelope (the default); `PubSubSink` (product `SpoolPubSub`)
/// publishes to Google Cloud Pub/Sub; `PostgresSink` (product `SpoolPostgres`) inserts into a
/// PostgreSQL table.
///
/// The contract that keeps delivery at least once: ``send(_:timeout:)`` answers
/// ``SinkOutcome/accepted`` only once the destination has durably taken **every** record of
/// the request; the worker then commits past them. Anything else leaves the offset where it is.
///
/// Records reach a sink unwrapped: the worker reads a batch and turns each record into the
/// ``OutgoingRecord`` every sink sends (``RecordUnwrapper``, with the sink's ``unwrapper``),
/// once, and keeps them with the batch for its retries, splits and hedges. A sink implements
/// the two `prepare` requirements, which take ``OutgoingRecord``s.
///
/// Thread safety: every member may be called from any task, several ``send(_:timeout:)`` at
/// once (up to the worker's concurrency, and at most ``maxInFlight`` when the sink sets it).
/// `prepare` is pure CPU work and runs off the worker's actor.
public protocol SyncSink: Sendable {
    /// The sink's encoded form of one request.
    associatedtype Request: Sendable

    /// The most requests the destination allows in flight at once, whatever the worker's
    /// concurrency: `1` where order must hold across requests (Pub/Sub with an ordering key);
    /// `nil` (the default) for no limit of the sink's own.
    var maxInFlight: Int? { get }

    /// How the worker turns the records it reads into the ``OutgoingRecord``s this sink is
    /// given: the log id and whether the log is a collector's, as the sink was made with.
    /// `nil` (the default): the drained log's id, and records sent as they are (the log is not
    /// a collector's).
    var unwrapper: RecordUnwrapper? { get }

    /// The next request: the longest prefix of `records` that one request can carry within
    /// about `maxBytes` (the sink says what it counts), and within the destination's own limits.
    ///
    /// The records come unwrapped, once, when the worker read them (``RecordUnwrapper``): a
    /// sink takes each record's id, seq, time and bytes from its ``OutgoingRecord`` and
    /// decodes nothing itself.
    ///
    /// - Parameters:
    ///   - records: at least one record, in seq order (of ``OutgoingRecord/stored``).
    ///   - maxBytes: the worker's `maxBatchBytes` (or less, under a 413 ceiling).
    /// - Returns: a request carrying at least the first record (a record too large for the
    ///   destination travels alone, and ``send(_:timeout:)`` refuses it with
    ///   ``SinkOutcome/rejected(_:)`` so that it is dead-lettered).
    func prepare(_ records: ArraySlice<OutgoingRecord>, maxBytes: Int) -> SinkRequest<Request>

    /// The request for exactly `records`: a half of a batch the worker split after a refusal,
    /// which always fits (it is smaller than a request `prepare` made). The records are the
    /// very ones the batch was read with: a split unwraps nothing again.
    func prepare(exactly records: [OutgoingRecord]) -> SinkRequest<Request>

    /// Sends `request` and says what the answer means for its records.
    ///
    /// It never throws: a transport failure is ``SinkOutcome/retry(_:)``, a refusal that no
    /// retry can change (credentials, a missing topic or table) is ``SinkOutcome/fatal(_:)``.
    /// It must honour task cancellation and should end by `timeout` (the worker also abandons
    /// it then). It must never log or put a payload into an error.
    func send(_ request: Request, timeout: Duration) async -> SinkOutcome

    /// How many requests the destination said, in its last answer, it takes at once, answering
    /// past them that it is overloaded (HTTP: a Spool collector's
    /// `Spool-Max-Concurrent-Requests` header); nil (the default) when it says nothing. The
    /// adaptive concurrency then grows on answers that waited in line at the destination:
    /// its refusals, not its queue, bound the growth.
    var declaredCapacity: Int? { get }

    /// Releases what the sink holds (connections, say); called once by ``SyncWorker/stop()``.
    func shutdown() async
}

extension SyncSink {
    /// No limit of the sink's own.
    public var maxInFlight: Int? { nil }

    /// Nothing said: the destination's queue holds growth.
    public var declaredCapacity: Int? { nil }

    /// None of the sink's own: the drained log's id, its records sent as they are.
    public var unwrapper: RecordUnwrapper? { nil }

    /// Does nothing: a sink that holds nothing has nothing to release.
    public func shutdown() async {}
}

/// One request a sink prepared, with what the worker needs to know of it.
public struct SinkRequest<Body: Sendable>: Sendable {
    /// The sink's encoded request.
    public var body: Body
    /// How many records it carries: the first `count` of those it was prepared from.
    public var count: Int
    /// How many bytes it sends (the body's size on the wire), for the counters and metrics.
    public var bytes: Int
    /// Its size as the sink measures it against `maxBytes` (HTTP: the body before
    /// compression); a 413 ceiling is set from it.
    public var measuredBytes: Int

    /// A request carrying the first `count` records, `bytes` long on the wire and
    /// `measuredBytes` (by default `bytes`) as the sink counts against `maxBytes`.
    public init(body: Body, count: Int, bytes: Int, measuredBytes: Int? = nil) {
        self.body = body
        self.count = count
        self.bytes = bytes
        self.measuredBytes = measuredBytes ?? bytes
    }
}
