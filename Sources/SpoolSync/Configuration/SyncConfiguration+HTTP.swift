/// The HTTP settings where they were before they moved to ``SyncConfiguration/http`` (issue
/// 34): kept for one release, each reading and writing its ``HTTPSink/Configuration`` field.
extension SyncConfiguration {
    /// The body layout: ``HTTPSink/Encoding``.
    @available(*, deprecated, renamed: "HTTPSink.Encoding")
    public typealias Encoding = HTTPSink.Encoding

    /// The body compression: ``HTTPSink/Compression``.
    @available(*, deprecated, renamed: "HTTPSink.Compression")
    public typealias Compression = HTTPSink.Compression

    /// The body layout: ``HTTPSink/Configuration/encoding``.
    @available(*, deprecated, renamed: "http.encoding")
    public var encoding: HTTPSink.Encoding {
        get { http.encoding }
        set { http.encoding = newValue }
    }

    /// The body compression: ``HTTPSink/Configuration/compression``.
    @available(*, deprecated, renamed: "http.compression")
    public var compression: HTTPSink.Compression {
        get { http.compression }
        set { http.compression = newValue }
    }

    /// The compression level: ``HTTPSink/Configuration/compressionLevel``.
    @available(*, deprecated, renamed: "http.compressionLevel")
    public var compressionLevel: Int32 {
        get { http.compressionLevel }
        set { http.compressionLevel = newValue }
    }

    /// Whether envelopes carry origin ids: ``HTTPSink/Configuration/forwardsOrigins``.
    @available(*, deprecated, renamed: "http.forwardsOrigins")
    public var forwardsOrigins: Bool {
        get { http.forwardsOrigins }
        set { http.forwardsOrigins = newValue }
    }

    /// Headers added to every request: ``HTTPSink/Configuration/headers``.
    @available(*, deprecated, renamed: "http.headers")
    public var headers: [String: String] {
        get { http.headers }
        set { http.headers = newValue }
    }

    /// 4xx statuses retried: ``HTTPSink/Configuration/retryableStatuses``.
    @available(*, deprecated, renamed: "http.retryableStatuses")
    public var retryableStatuses: Set<Int> {
        get { http.retryableStatuses }
        set { http.retryableStatuses = newValue }
    }
}
