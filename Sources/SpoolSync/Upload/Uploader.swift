import Spool

/// Sends one request body to a server: the transport seam of the sync worker.
///
/// The defaults are ``HTTPClientUploader`` (AsyncHTTPClient) on Linux and
/// ``URLSessionUploader`` on Apple platforms; plug your own to use another HTTP client or
/// another protocol altogether. An implementation answers with the server's response
/// whatever its status (the worker classifies it), and throws only when there is no
/// response: a network failure, a reset, a malformed answer. It must honour task
/// cancellation (the worker cancels a request that outlives `request.timeout`) and must never
/// log or put a payload into an error.
///
/// Thread safety: `upload` may be called from any task, and concurrently: a worker keeps up to
/// ``SyncConfiguration/concurrency`` requests in flight at once (one with `.fixed(1)`).
public protocol Uploader: Sendable {
    /// Sends `request` and returns the server's answer.
    func upload(_ request: UploadRequest) async throws -> UploadResponse
}

/// One request: a finished body and its headers.
public struct UploadRequest: Sendable {
    /// The records the body holds.
    public var batch: BatchID
    /// Every header to send, `Content-Type` and `Spool-Batch` included.
    public var headers: [String: String]
    /// The body, already encoded and compressed.
    public var body: [UInt8]
    /// How long the request may take.
    public var timeout: Duration
    /// How much of the answer's body to keep: the worker needs only a short message, a sink
    /// that reads the answer (Pub/Sub's message ids) asks for more. The default is 4 KiB.
    public var maxResponseBytes: Int

    /// A request with every field given.
    public init(batch: BatchID, headers: [String: String], body: [UInt8], timeout: Duration, maxResponseBytes: Int = 4096) {
        self.batch = batch
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.maxResponseBytes = maxResponseBytes
    }
}

/// The identity of a batch: the log and the inclusive range of sequence numbers it holds.
///
/// Its description, `<log id>:<first>-<last>`, is the `Spool-Batch` header: the same
/// records always carry the same value, so a server can drop a batch it already stored.
public struct BatchID: Sendable, Hashable, CustomStringConvertible {
    /// The log the records come from.
    public var log: LogID
    /// The seq of the batch's first record.
    public var first: UInt64
    /// The seq of the batch's last record (inclusive).
    public var last: UInt64

    /// The batch of `log` holding seqs `first ... last`.
    public init(log: LogID, first: UInt64, last: UInt64) {
        self.log = log
        self.first = first
        self.last = last
    }

    /// `<log id>:<first>-<last>`, the `Spool-Batch` header's value.
    public var description: String { "\(log):\(first)-\(last)" }
}

/// A server's answer.
public struct UploadResponse: Sendable {
    /// The HTTP status.
    public var status: Int
    /// The headers, names lowercased.
    public var headers: [String: String]
    /// The start of the body: at most the request's ``UploadRequest/maxResponseBytes``.
    public var body: [UInt8]

    /// An answer with this status, headers (names lowercased) and start of body.
    public init(status: Int, headers: [String: String] = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { first, _ in first })
        self.body = body
    }
}
