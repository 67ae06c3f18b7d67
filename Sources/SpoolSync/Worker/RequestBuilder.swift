import Spool

/// Turns records into requests: packs a batch within `maxBatchBytes`, encodes, compresses,
/// and sets the headers. Pure CPU work, run off the worker's actor.
struct RequestBuilder: Sendable {
    let logID: LogID
    let encoder: BatchEncoder
    let compressor: BodyCompressor
    let timeout: Duration
    let extraHeaders: [String: String]

    init(logID: LogID, configuration: SyncConfiguration) {
        self.logID = logID
        self.encoder = BatchEncoder(logID: logID, encoding: configuration.encoding, forwardsOrigins: configuration.forwardsOrigins)
        self.compressor = BodyCompressor(compression: configuration.compression, level: configuration.compressionLevel)
        self.timeout = configuration.requestTimeout
        // The worker's own headers win, whatever the case of the caller's names.
        let reserved: Set<String> = ["content-type", "content-encoding", "content-length", "spool-batch", "spool-encoding"]
        self.extraHeaders = configuration.headers.filter { !reserved.contains($0.key.lowercased()) }
    }

    /// A round of batches from what a read returned, in seq order: at most `batches` of them,
    /// each of at most `maxCount` records and cut by ``prepare(_:maxBytes:)``. Records left
    /// over are read again after the commit. A read of no records gives one empty batch that
    /// carries its `end` (a skipped range, or nothing pending).
    func prepare(_ read: SourceBatch, maxCount: Int, maxBytes: Int, batches: Int) -> [SyncBatch] {
        var rest = read.records[...]
        var round: [SyncBatch] = []
        while round.count < batches, !rest.isEmpty {
            let chunk = Array(rest.prefix(maxCount))
            let end = chunk.count == rest.count ? read.end : chunk[chunk.count - 1].seq + 1
            let batch = prepare(SourceBatch(records: chunk, end: end), maxBytes: maxBytes)
            round.append(batch)
            rest = rest.dropFirst(batch.records.count)
        }
        return round.isEmpty ? [SyncBatch(records: [], end: read.end)] : round
    }

    /// The batch to send from what a read returned: the longest prefix of its records whose
    /// body fits `maxBytes` (at least one record), with its request built.
    ///
    /// A raw body carries no ids: element *i* is seq *first + i* of the `Spool-Batch` header.
    /// So a raw batch also ends at the first gap in its seqs (an expired, dropped or corrupt
    /// range the read skipped inside it); the records after the gap go in the next request.
    func prepare(_ read: SourceBatch, maxBytes: Int) -> SyncBatch {
        guard !read.records.isEmpty else { return SyncBatch(records: [], end: read.end) }
        if encoder.encoding == .raw, let gap = Self.firstGap(in: read.records) {
            let dense = Array(read.records[..<gap])
            return prepare(SourceBatch(records: dense, end: dense[gap - 1].seq + 1), maxBytes: maxBytes)
        }
        let (body, count) = encoder.encode(read.records, maxBytes: maxBytes)
        if count == read.records.count {
            return SyncBatch(records: read.records, end: read.end, request: request(read.records, body: body))
        }
        let records = Array(read.records[..<count])
        return SyncBatch(records: records, end: records[count - 1].seq + 1, request: request(records, body: body))
    }

    /// The index of the first record whose seq does not follow its predecessor's, if any.
    static func firstGap(in records: [Record]) -> Int? {
        guard let first = records.first?.seq else { return nil }
        return records.indices.dropFirst().first { records[$0].seq != first &+ UInt64($0) }
    }

    /// The request for exactly `records` (a half of a split batch, which always fits).
    func request(for records: [Record]) -> UploadRequest {
        request(records, body: encoder.encode(records, maxBytes: Int.max).body)
    }

    private func request(_ records: [Record], body: [UInt8]) -> UploadRequest {
        let batch = BatchID(log: logID, first: records[0].seq, last: records[records.count - 1].seq)
        let (compressed, contentEncoding) = compressor.compress(body)
        var headers = extraHeaders
        headers["Content-Type"] = encoder.contentType
        headers["Spool-Batch"] = batch.description
        if let contentEncoding { headers["Content-Encoding"] = contentEncoding }
        if encoder.encoding == .raw { headers["Spool-Encoding"] = "raw" }
        return UploadRequest(batch: batch, headers: headers, body: compressed, timeout: timeout)
    }
}
