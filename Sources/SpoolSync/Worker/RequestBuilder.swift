import Spool

/// Turns records into HTTP requests for ``HTTPSink``: packs a body within a byte limit,
/// encodes, compresses, and sets the headers. Pure CPU work, run off the worker's actor. The
/// records come unwrapped (``OutgoingRecord``); the `Spool-Batch` header names their seqs as
/// read from the drained log.
struct RequestBuilder: Sendable {
    let logID: LogID
    let encoder: BatchEncoder
    let compressor: BodyCompressor
    let timeout: Duration
    let extraHeaders: [String: String]

    init(logID: LogID, configuration: HTTPSink.Configuration, timeout: Duration) {
        self.logID = logID
        self.encoder = BatchEncoder(logID: logID, encoding: configuration.encoding, forwardsOrigins: configuration.forwardsOrigins)
        self.compressor = BodyCompressor(compression: configuration.compression, level: configuration.compressionLevel)
        self.timeout = timeout
        // The worker's own headers win, whatever the case of the caller's names.
        let reserved: Set<String> = ["content-type", "content-encoding", "content-length", "spool-batch", "spool-encoding"]
        self.extraHeaders = configuration.headers.filter { !reserved.contains($0.key.lowercased()) }
    }

    /// The request for the longest prefix of `records` whose body fits `maxBytes` (at least
    /// one record), how many records it holds, and its body's size before compression.
    func request(_ records: ArraySlice<OutgoingRecord>, maxBytes: Int) -> (UploadRequest, count: Int, encodedBytes: Int) {
        let (body, count) = encoder.encode(records, maxBytes: maxBytes)
        let taken = records.prefix(count)
        return (request(taken, body: body), count, body.count)
    }

    /// The index of the first record whose seq in the drained log does not follow its
    /// predecessor's, if any.
    static func firstGap(in records: ArraySlice<OutgoingRecord>) -> Int? {
        guard let first = records.first?.stored.seq else { return nil }
        return records.indices.dropFirst().first { records[$0].stored.seq != first &+ UInt64($0 - records.startIndex) }
    }

    /// The request for exactly `records` (a half of a split batch, which always fits).
    func request(for records: [OutgoingRecord]) -> UploadRequest {
        request(records[...], body: encoder.encode(records, maxBytes: Int.max).body)
    }

    private func request(_ records: ArraySlice<OutgoingRecord>, body: [UInt8]) -> UploadRequest {
        let batch = BatchID(log: records[records.startIndex].source, first: records[records.startIndex].stored.seq, last: records[records.endIndex - 1].stored.seq)
        let (compressed, contentEncoding) = compressor.compress(body)
        var headers = extraHeaders
        headers["Content-Type"] = encoder.contentType
        headers["Spool-Batch"] = batch.description
        if let contentEncoding { headers["Content-Encoding"] = contentEncoding }
        if encoder.encoding == .raw { headers["Spool-Encoding"] = "raw" }
        return UploadRequest(batch: batch, headers: headers, body: compressed, timeout: timeout)
    }
}
