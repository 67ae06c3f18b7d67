extension HTTPSink {
    /// How records are laid out in a request body.
    public enum Encoding: String, Sendable, CaseIterable {
        /// A JSON array of envelopes `{"id":"<log id>-<seq>","seq":…,"time":<ms>,"data":…}`,
        /// `Content-Type: application/json`. The default.
        case json
        /// The same envelopes, one per line, `Content-Type: application/x-ndjson`.
        case ndjson
        /// A JSON array of the records themselves, `Spool-Encoding: raw`; the ids travel only in
        /// the `Spool-Batch` header.
        case raw
    }

    /// How a request body is compressed (`Content-Encoding`).
    public enum Compression: String, Sendable, CaseIterable {
        /// Sent as it is. The default.
        case none
        /// gzip (zlib, `Content-Encoding: gzip`).
        case gzip
        /// zstd (`Content-Encoding: zstd`).
        case zstd
    }

    /// The settings only the HTTP sink reads: how a body is laid out, compressed and
    /// labelled, and which statuses are retried. The worker's own settings (batching,
    /// concurrency, timeouts, backoff) stay in ``SyncConfiguration``, whose
    /// ``SyncConfiguration/http`` holds the one a worker given an uploader posts with.
    public struct Configuration: Sendable, Equatable {
        /// The body layout. The default is ``HTTPSink/Encoding/json``.
        public var encoding: HTTPSink.Encoding = .json
        /// The body compression. The default is ``HTTPSink/Compression/none``.
        public var compression: HTTPSink.Compression = .none
        /// The compression level: zlib's 1 ... 9 for gzip, zstd's -7 ... 22 for zstd. The
        /// default is 1 (fastest for both).
        public var compressionLevel: Int32 = 1
        /// Whether the log's records are `OriginRecord`s (a collector's log, FORMAT.md §11):
        /// each envelope then carries the record's origin id, seq and time (``BatchEncoder``),
        /// so the next collector or sink keeps the device's id. `spool sync` sets it when the
        /// log's directory is marked (`OriginRecord.storesOrigins(at:)`). Not with
        /// ``HTTPSink/Encoding/raw``, which has no envelope. The default is `false`.
        public var forwardsOrigins: Bool = false
        /// Headers added to every request (an API key, say). `Content-Type`, `Content-Encoding`, `Spool-Batch`
        /// and `Spool-Encoding` are set by the sink and win over these. The default is none.
        public var headers: [String: String] = [:]
        /// 4xx statuses that are retried rather than treated as a poison batch: credentials and
        /// routing problems that a person fixes, after which nothing should have been
        /// dead-lettered. 5xx, 408 and 429 are always retried, listed or not; 413 always
        /// splits. The default is 401, 403, 404, 407, 408, 425, 429.
        public var retryableStatuses: Set<Int> = [401, 403, 404, 407, 408, 425, 429]

        /// The defaults, as documented on each setting.
        public init() {}

        /// Checks every field, throwing ``SyncError/Code/invalidConfiguration`` with a message
        /// that names the first one out of range.
        public func validate() throws(SyncError) {
            try validate(as: "HTTPSink.Configuration")
        }

        /// ``validate()``, naming the fields as members of `owner`.
        func validate(as owner: String) throws(SyncError) {
            func fail(_ field: String, _ why: String) -> SyncError {
                SyncError(.invalidConfiguration, "\(owner).\(field) \(why)")
            }
            if forwardsOrigins && encoding == .raw {
                throw fail("encoding", "is raw, which cannot carry the origin ids of a collector's records (forwardsOrigins); use json or ndjson")
            }
            switch compression {
            case .gzip where !(1...9).contains(compressionLevel):
                throw fail("compressionLevel", "is \(compressionLevel); gzip accepts 1 ... 9")
            case .zstd where !(-7...22).contains(compressionLevel):
                throw fail("compressionLevel", "is \(compressionLevel); zstd accepts -7 ... 22")
            default: break
            }
            for name in headers.keys where !Self.isToken(name) {
                throw fail("headers", "has the invalid header name \"\(name)\"")
            }
            for (name, value) in headers where value.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D || $0 == 0 }) {
                throw fail("headers", "has a line break or NUL in the value of \"\(name)\"")
            }
            if let status = retryableStatuses.first(where: { !(400...499).contains($0) || $0 == 413 }) {
                throw fail("retryableStatuses", "contains \(status); only 4xx other than 413 may be listed")
            }
        }

        /// Whether `name` is an HTTP token (RFC 9110 §5.6.2).
        private static func isToken(_ name: String) -> Bool {
            !name.isEmpty && name.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"):
                    true
                default:
                    "!#$%&'*+-.^_`|~".utf8.contains(byte)
                }
            }
        }
    }
}
