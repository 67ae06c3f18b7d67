import Spool
import Synchronization

/// Posts Spool's envelope over HTTP: the default destination, for the reference collector or
/// any server that speaks the wire format (``HTTPSink/Encoding``, `Spool-Batch`).
///
/// A request is one body of at most `maxBytes` encoded bytes (before compression), sent
/// through an ``Uploader``; the answer's status says what happened: 2xx accepted; 413 too
/// large; 408, 429, 5xx and the configuration's ``Configuration/retryableStatuses`` retried
/// (`Retry-After` honoured); any other 4xx refused; a failure without an answer retried. A raw
/// body (``HTTPSink/Encoding/raw``) carries no ids, so a raw request also ends at the
/// first gap in its seqs.
///
/// Thread safety: a value type of immutable parts, and one atomic (the capacity the last
/// answer declared, shared by its copies); use from any task.
public struct HTTPSink: SyncSink {
    /// The transport.
    public let uploader: any Uploader
    let builder: RequestBuilder
    let retryableStatuses: Set<Int>
    let wallClock: @Sendable () -> Double
    /// What the last answer's `Spool-Max-Concurrent-Requests` said (``declaredCapacity``).
    private let lastDeclared = DeclaredCapacity()

    /// A sink posting the records of log `logID` through `uploader`, encoded, compressed and
    /// with the headers `configuration` says.
    ///
    /// - Parameters:
    ///   - uploader: the transport.
    ///   - logID: the log the records come from (the `Spool-Batch` header and the record ids).
    ///   - configuration: the encoding, compression, headers and retryable statuses.
    ///   - requestTimeout: the timeout a prepared request carries (the worker sets each
    ///     request's own when it sends it). The default is 30 s.
    ///   - wallClock: seconds since 1970, to read `Retry-After` dates.
    /// - Throws: ``SyncError/Code/invalidConfiguration`` naming the first setting out of range.
    public init(
        uploader: any Uploader, logID: LogID, configuration: Configuration, requestTimeout: Duration = .seconds(30),
        wallClock: @escaping @Sendable () -> Double = SyncWorker<ContinuousClock>.systemWallClock
    ) throws(SyncError) {
        try configuration.validate()
        self.init(uploader: uploader, logID: logID, validated: configuration, requestTimeout: requestTimeout, wallClock: wallClock)
    }

    /// A sink with the HTTP settings of `configuration` (``SyncConfiguration/http``), which
    /// the worker validates.
    ///
    /// - Parameters:
    ///   - uploader: the transport.
    ///   - logID: the log the records come from (the `Spool-Batch` header and the record ids).
    ///   - configuration: the encoding, compression, headers, timeout and retryable statuses.
    ///   - wallClock: seconds since 1970, to read `Retry-After` dates.
    public init(
        uploader: any Uploader, logID: LogID, configuration: SyncConfiguration,
        wallClock: @escaping @Sendable () -> Double = SyncWorker<ContinuousClock>.systemWallClock
    ) {
        self.init(uploader: uploader, logID: logID, validated: configuration.http,
                  requestTimeout: configuration.requestTimeout, wallClock: wallClock)
    }

    private init(
        uploader: any Uploader, logID: LogID, validated configuration: Configuration, requestTimeout: Duration,
        wallClock: @escaping @Sendable () -> Double
    ) {
        self.uploader = uploader
        self.builder = RequestBuilder(logID: logID, configuration: configuration, timeout: requestTimeout)
        self.retryableStatuses = configuration.retryableStatuses
        self.wallClock = wallClock
    }

    /// The log the sink posts the records of, and whether it is a collector's
    /// (``Configuration/forwardsOrigins``): the worker unwraps its records with it.
    public var unwrapper: RecordUnwrapper? {
        RecordUnwrapper(logID: builder.logID, origins: builder.encoder.forwardsOrigins)
    }

    /// The longest prefix of `records` whose body fits `maxBytes` (at least one record); for
    /// the raw encoding, also no further than the first gap in the seqs.
    public func prepare(_ records: ArraySlice<OutgoingRecord>, maxBytes: Int) -> SinkRequest<UploadRequest> {
        var records = records
        if builder.encoder.encoding == .raw, let gap = RequestBuilder.firstGap(in: records) {
            records = records[..<gap]
        }
        let (request, count, encoded) = builder.request(records, maxBytes: maxBytes)
        return SinkRequest(body: request, count: count, bytes: request.body.count, measuredBytes: encoded)
    }

    /// The request for exactly `records`.
    public func prepare(exactly records: [OutgoingRecord]) -> SinkRequest<UploadRequest> {
        let request = builder.request(for: records)
        return SinkRequest(body: request, count: records.count, bytes: request.body.count)
    }

    /// Posts the request and classifies the answer by its status.
    public func send(_ request: UploadRequest, timeout: Duration) async -> SinkOutcome {
        var request = request
        request.timeout = timeout
        do {
            let response = try await uploader.upload(request)
            lastDeclared.store(Self.declaredCapacity(of: response))
            return Self.outcome(of: response, retryableStatuses: retryableStatuses, now: wallClock())
        } catch {
            return .failed(error)
        }
    }
}

extension HTTPSink {
    /// How many requests the server said in its last answer it takes at once
    /// (`Spool-Max-Concurrent-Requests`, as a Spool collector sends); nil when it said nothing,
    /// or no answer came yet.
    public var declaredCapacity: Int? { lastDeclared.load() }
}

/// The capacity the last answer declared, shared by a sink's copies: 0 for none.
final class DeclaredCapacity: Sendable {
    private let value = Atomic<Int>(0)

    func store(_ capacity: Int?) { value.store(capacity ?? 0, ordering: .relaxed) }

    func load() -> Int? {
        let capacity = value.load(ordering: .relaxed)
        return capacity > 0 ? capacity : nil
    }
}
