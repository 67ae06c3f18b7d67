/// The one error type of the sync worker.
///
/// `code` says what kind of failure it is (compare it with the static members of
/// ``SyncError/Code``), `message` says what happened in words a person can act on, `status`
/// carries the HTTP status when there was one, and `cause` the error underneath (a transport
/// error, or the `SpoolError` of a failed commit). Payloads never appear in an error's
/// `message` or `description`: a server's own message, which may echo what was sent, is kept
/// apart in ``serverMessage`` (truncated to ``SyncError/maxServerMessageLength`` characters,
/// control characters replaced) and is never logged.
public struct SyncError: Error, Sendable, CustomStringConvertible {
    /// The kind of failure: an extensible set, compared with `==`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Kind: String, Sendable {
            case network, timeout, serverError, rateLimited, unexpectedResponse, unauthorized
            case payloadTooLarge, rejected, readFailed, commitFailed, deadLetterFailed
            case stopped, invalidConfiguration, destinationRefused, internalError, damaged
        }
        private let kind: Kind
        private init(_ kind: Kind) { self.kind = kind }

        /// The transport failed: connection refused or reset, DNS, TLS, a malformed answer. Retried.
        public static let network = Code(.network)
        /// No answer within `SyncConfiguration.requestTimeout`. Retried.
        public static let timeout = Code(.timeout)
        /// The server answered 5xx, 408, or another status listed in
        /// `HTTPSink.Configuration.retryableStatuses`. Retried.
        public static let serverError = Code(.serverError)
        /// The server answered 429 Too Many Requests. Retried, honouring `Retry-After`.
        public static let rateLimited = Code(.rateLimited)
        /// The server refused the request's credentials: 401 Unauthorized or 403 Forbidden
        /// (check the `Authorization` header), or a proxy's 407 (check `Proxy-Authorization`),
        /// when `HTTPSink.Configuration.retryableStatuses` lists the status (the default: a token
        /// may be rotated meanwhile). Retried.
        public static let unauthorized = Code(.unauthorized)
        /// The server answered a status that is neither success nor an error (1xx, 3xx, ≥ 600). Retried.
        public static let unexpectedResponse = Code(.unexpectedResponse)
        /// The server answered 413: the batch is split; a lone record is dead-lettered.
        public static let payloadTooLarge = Code(.payloadTooLarge)
        /// The server refused the batch with a 4xx (a poison batch): it is split until the
        /// refused records are alone, and those are dead-lettered.
        public static let rejected = Code(.rejected)
        /// Reading the consumer failed (an I/O error in the log). Ends the flush.
        public static let readFailed = Code(.readFailed)
        /// Committing the consumer's offset failed. Ends the flush; the next flush starts again
        /// from the offset on disk.
        public static let commitFailed = Code(.commitFailed)
        /// Writing refused records to the dead-letter log failed. Ends the flush; nothing is committed.
        public static let deadLetterFailed = Code(.deadLetterFailed)
        /// The worker was stopped before the flush finished.
        public static let stopped = Code(.stopped)
        /// A `SyncConfiguration` value is out of range; the message names the field.
        public static let invalidConfiguration = Code(.invalidConfiguration)
        /// The destination refused in a way no retry changes and no record is to blame for:
        /// credentials, permissions, a missing topic or table. The worker stops; the message
        /// names the destination and its answer.
        public static let destinationRefused = Code(.destinationRefused)
        /// A check of the worker's own invariants failed (a defect in Spool, never the
        /// destination's or the log's): for example a read that would leave a gap in the
        /// window. The worker stops before committing anything past the gap; the message names
        /// the offsets. Please report it.
        public static let internalError = Code(.internalError)
        /// The log could not read a range of records (damaged bytes) and
        /// ``SyncConfiguration/onDamage`` is ``SyncConfiguration/DamagePolicy/stop``: the worker
        /// stopped, committed up to the range and not past it; the message names the range
        /// and the segment.
        public static let damaged = Code(.damaged)

        /// Whether a failure of this kind is retried with backoff (nothing is committed, nothing lost).
        public var isRetryable: Bool {
            switch kind {
            case .network, .timeout, .serverError, .rateLimited, .unexpectedResponse, .unauthorized: true
            default: false
            }
        }

        /// The code's name, spelt as its constant: `network`, `serverError`, `rejected`…
        public var description: String { kind.rawValue }
    }

    /// The longest server message kept in an error, in characters.
    public static let maxServerMessageLength = 200

    /// What kind of failure this is.
    public var code: Code
    /// What went wrong, for a person. Never contains a payload.
    public var message: String
    /// The HTTP status, when the server answered.
    public var status: Int?
    /// The server's `Retry-After`, when it sent a valid one.
    public var retryAfter: Duration?
    /// Whether the failure says the destination is overloaded: the adaptive concurrency
    /// halves on these, and only on these. The worker never reads a destination's own words
    /// (a status, an SQLSTATE): each sink sets this from its answers (``HTTPSink``: 429, 503,
    /// 408; PostgreSQL: SQLSTATE class 53 and 57P03; Pub/Sub: `RESOURCE_EXHAUSTED` and
    /// `UNAVAILABLE`). The default is `true` for ``Code/rateLimited`` and ``Code/timeout`` (no
    /// answer in time is overload until proven otherwise) and `false` for every other code.
    public var overloaded: Bool
    /// The error underneath, if any.
    public var cause: (any Error)?
    /// The start of the server's answer body, when it sent one: at most
    /// ``maxServerMessageLength`` characters, control characters replaced. A server may echo
    /// the records it refused, so this is kept out of ``message`` and ``description`` and out
    /// of the worker's logs; read it deliberately (the dead-letter log does not store it either).
    public var serverMessage: String?

    /// An error of kind `code` with `message` (which must hold no payload); `overloaded`
    /// defaults to whether `code` is ``Code/rateLimited`` or ``Code/timeout``.
    public init(
        _ code: Code, _ message: String, status: Int? = nil, retryAfter: Duration? = nil,
        cause: (any Error)? = nil, overloaded: Bool? = nil
    ) {
        self.code = code
        self.message = message
        self.status = status
        self.retryAfter = retryAfter
        self.cause = cause
        self.overloaded = overloaded ?? (code == .rateLimited || code == .timeout)
    }

    /// `<code>: <message>`, then ` (HTTP <status>)` and ` [<cause>]` when there are; never
    /// ``serverMessage``, which may echo records.
    public var description: String {
        var text = "\(code): \(message)"
        if let status { text += " (HTTP \(status))" }
        if let cause { text += " [\(cause)]" }
        return text
    }

    /// A server's answer body as a short, printable message: at most
    /// ``maxServerMessageLength`` characters, invalid UTF-8 and control characters replaced.
    public static func serverMessage(_ body: [UInt8]) -> String {
        let prefix = body.prefix(maxServerMessageLength * 4)
        var text = String(decoding: prefix, as: UTF8.self)
        text = String(text.unicodeScalars.prefix(maxServerMessageLength).map { scalar -> Character in
            scalar.properties.generalCategory == .control ? " " : Character(scalar)
        })
        return text.trimmingWhitespace()
    }
}

extension String {
    fileprivate func trimmingWhitespace() -> String {
        var view = Substring(self)
        while let first = view.first, first.isWhitespace { view.removeFirst() }
        while let last = view.last, last.isWhitespace { view.removeLast() }
        return String(view)
    }
}
