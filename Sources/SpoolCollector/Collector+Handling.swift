import HTTPTypes
import Hummingbird
import Logging
import Spool
import Synchronization

extension Collector {
    /// Answers one request. In order: `/healthz` and `/livez`; 501 for a transfer coding other
    /// than `chunked` (RFC 9112 §6.1: the body's framing is not one the collector applies);
    /// 405 for a method other than `POST`; 401 without a valid bearer token (with
    /// ``CollectorConfiguration/authTokenFile``), before the body is read; the body is read
    /// (413 past ``CollectorConfiguration/maxBodyBytes``, at once for a declared length past
    /// it; 408 when it is slow; 503 when the bodies being read would pass their budget); then
    /// 503 when ``CollectorConfiguration/maxConcurrentRequests`` are already being handled (each
    /// may hold a whole body, raw and decompressed, so a burst of uploaders must not hold them
    /// all at once), else the request is handled. Reading a body takes no slot: a slow sender
    /// holds only the bytes it has sent.
    ///
    /// Every answer but the probes' says how many requests the collector takes at once
    /// (``capacityField``), so that senders grow on its refusals rather than hold on its queue.
    func handle(_ request: Request, context: CollectorRequestContext) async -> Response {
        // Before admission: a load balancer's probe must not be refused for being one too many.
        if request.method == .get || request.method == .head, request.uri.path == "/healthz" {
            guard let problem = health else { return Self.answer(200, json: #"{"status":"ok"}"#) }
            return Self.answer(503, json: #"{"status":"unavailable","reason":"\#(Self.jsonEscaped(problem))"}"#)
        }
        if request.method == .get || request.method == .head, request.uri.path == "/livez" {
            return Self.answer(200, json: #"{"status":"alive"}"#)
        }
        var response = await handleBatch(request, context: context)
        response.headers[Self.capacityField] = String(configuration.maxConcurrentRequests)
        return response
    }

    /// The header in which the collector says how many requests it takes at once
    /// (``CollectorConfiguration/maxConcurrentRequests``), answering 503 past them: HTTP/2's
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`, for any HTTP version. `HTTPSink` reads it.
    static let capacityField = HTTPField.Name("Spool-Max-Concurrent-Requests")!

    /// ``handle(_:context:)`` for a request that is not a probe.
    private func handleBatch(_ request: Request, context: CollectorRequestContext) async -> Response {
        tallies.withLock { $0.stats.requests += 1 }
        let header = Self.header(BatchHeader.name, in: request).flatMap(BatchHeader.init)
        if let codings = request.headers[.transferEncoding], codings.lowercased().split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) != ["chunked"] {
            return reject(BatchRejection(status: 501, message: "Transfer-Encoding \(codings.prefix(100)) is not supported; only chunked is"), header: header)
        }
        guard request.method == .post else {
            return Self.answer(405, error: "only POST is accepted", extra: [.allow: "POST"])
        }
        let grant = tokens?.grant(request.headers[.authorization])
        if tokens != nil, grant == nil {
            tallies.withLock { $0.stats.unauthorized += 1 }
            logger.debug("unauthorized request")
            return Self.answer(401, error: "a valid Authorization: Bearer token is required", extra: [.wwwAuthenticate: "Bearer"])
        }
        let held = HeldBytes(self)
        defer { held.releaseAll() }
        let body: [UInt8]
        switch await readBody(request, held: held) {
        case .success(let bytes): body = bytes
        case .failure(let rejection) where rejection.status == 503: return overloaded(rejection.message)
        case .failure(let rejection): return reject(rejection, header: header)
        }
        tallies.withLock { $0.stats.bodyBytes += body.count }
        guard admit() else { return overloaded("too many requests in flight") }
        saturation.withLock { $0.admitted() }
        defer { inFlight.withLock { $0 -= 1 } }
        return await handleAdmitted(request, body: body, header: header, grant: grant ?? .anyLog, context: context)
    }

    /// 503 without `Retry-After`, counted as overloaded: every request slot (or the bodies'
    /// budget) is taken this moment, which says nothing of when the next request will fit. A
    /// sender with several requests in flight retries this one on its own and lowers its
    /// concurrency once such answers are a share of its traffic; a `Retry-After: 1` here made
    /// it wait a second for a slot that freed within a round trip.
    private func overloaded(_ why: String) -> Response {
        tallies.withLock { $0.stats.overloaded += 1 }
        saturation.withLock { $0.refused(at: .now) }
        logger.debug("overloaded", metadata: ["limit": "\(configuration.maxConcurrentRequests)", "reason": "\(why)"])
        return Self.answer(503, error: why)
    }

    /// The bytes all bodies being read or handled may hold at once:
    /// ``CollectorConfiguration/maxConcurrentRequests`` times ``CollectorConfiguration/maxBodyBytes``.
    var bodyBudget: Int {
        let (budget, overflow) = configuration.maxConcurrentRequests.multipliedReportingOverflow(by: configuration.maxBodyBytes)
        return overflow ? .max : budget
    }

    /// Takes a slot among the requests in flight, if one is free.
    private func admit() -> Bool {
        inFlight.withLock { count in
            guard count < configuration.maxConcurrentRequests else { return false }
            count += 1
            return true
        }
    }

    /// Answers one admitted request, its body read. In order: injected latency; an injected
    /// reset, 429 or failure; the payload-size rule; headers, decompression (413 past
    /// ``CollectorConfiguration/maxDecodedBytes``) and records are checked (400 or 415); 403
    /// for a record of a log id the token is not bound to (``TokenGrant``);
    /// 413 for a record past ``CollectorConfiguration/maxRecordBytes``; the poison rule; then new records are recorded (with a log, synced: 503 when it cannot
    /// be) and the answer is `{"accepted":N,"duplicates":M,"conflicts":C}`.
    private func handleAdmitted(_ request: Request, body: [UInt8], header: BatchHeader?, grant: TokenGrant, context: CollectorRequestContext) async -> Response {
        let draw = tallies.withLock { $0.faults.next() }
        if draw.delay > .zero {
            try? await Task.sleep(for: draw.delay)
        }

        switch draw.fault {
        case .reset:
            tallies.withLock { $0.stats.faults.resets += 1 }
            logger.debug("injected reset")
            await context.closeConnection()
            return Self.answer(500, error: "reset")
        case .rateLimit:
            tallies.withLock { $0.stats.faults.rateLimited += 1 }
            logger.debug("injected rate limit")
            let seconds = configuration.faults.retryAfterSeconds ?? 1
            return Self.answer(429, error: "injected rate limit", extra: [.retryAfter: String(seconds)])
        case .failure:
            tallies.withLock { $0.stats.faults.failures += 1 }
            logger.debug("injected failure", metadata: ["status": "\(configuration.faults.failureStatus)"])
            let extra: HTTPFields = configuration.faults.retryAfterSeconds.map { [.retryAfter: String($0)] } ?? [:]
            return Self.answer(configuration.faults.failureStatus, error: "injected failure", extra: extra)
        case nil:
            break
        }
        if let limit = configuration.faults.payloadTooLargeAbove, body.count > limit {
            tallies.withLock { $0.stats.faults.payloadTooLarge += 1 }
            return reject(BatchRejection(status: 413, message: "the body is larger than \(limit) bytes"), header: header)
        }

        let records: [ReceivedRecord]
        do {
            records = try decodeBatch(request, body: body, header: header)
        } catch {
            return reject(error, header: header)
        }
        if let header, let refused = ([header.logID] + records.map(\.logID)).first(where: { !grant.allows($0) }) {
            return reject(BatchRejection(status: 403, message: "this token may write only the log ids its line of the token file names, and \(refused) is not one of them"), header: header)
        }
        if let index = records.firstIndex(where: { $0.payloadCount > configuration.maxRecordBytes }) {
            let limit = configuration.maxRecordBytes
            return reject(BatchRejection(status: 413, message: "record \(index) (seq \(records[index].seq)) is \(records[index].payloadCount) bytes, larger than this collector's limit of \(limit) bytes per record (CollectorConfiguration.maxRecordBytes, --max-record-bytes)"), header: header)
        }
        if let marker = configuration.faults.poisonMarker, records.contains(where: { $0.contains(marker) }) {
            tallies.withLock { $0.stats.faults.poisoned += 1 }
            return reject(.badRequest("the batch holds a poisoned record"), header: header)
        }

        let retains = configuration.retainsRecords
        let outcome: Result<(accepted: Int, duplicates: Int, conflicts: Int, syncTarget: UInt64?), any Error>
        do {
            outcome = .success(try await onLedgerQueue { ledger in
                let recorded = try ledger.record(records)
                let (fresh, duplicates, forgotten) = (recorded.fresh, recorded.duplicates, recorded.forgotten)
                if recorded.conflicts > 0 { self.logConflicts(in: fresh) }
                if forgotten > 0 {
                    self.logger.warning("forgot the received seqs of the least recently seen logs: a batch they re-send is recorded again",
                                        metadata: ["forgotten": "\(forgotten)", "maxTrackedLogs": "\(self.configuration.maxTrackedLogs)"])
                }
                // Still on the ledger queue: records() keeps the output file's order.
                self.tallies.withLock { tallies in
                    tallies.stats.acceptedBatches += 1
                    tallies.stats.received += fresh.count
                    tallies.stats.duplicates += duplicates
                    tallies.stats.conflicts += recorded.conflicts
                    tallies.stats.forgottenLogs += forgotten
                    if retains { tallies.records += fresh }
                }
                return (fresh.count, duplicates, recorded.conflicts, recorded.syncTarget)
            })
        } catch let rejection as BatchRejection {
            return reject(rejection, header: header)
        } catch {
            outcome = .failure(error)
        }
        switch outcome {
        case .success(let counts):
            // Group commit: the requests waiting here share the log's next fdatasync.
            if let target = counts.syncTarget, let log = collectorLog.withLock({ $0 }) {
                do {
                    try await log.waitUntil(before: target, is: .synced)
                } catch {
                    return logFailed(error)
                }
            }
            logger.trace("batch recorded", metadata: ["accepted": "\(counts.accepted)", "duplicates": "\(counts.duplicates)"])
            return Self.answer(200, json: #"{"accepted":\#(counts.accepted),"duplicates":\#(counts.duplicates),"conflicts":\#(counts.conflicts)}"#)
        case .failure(let error):
            if configuration.logDirectory != nil, error is SpoolError { return logFailed(error) }
            logger.error("collector output write failed", metadata: ["error": "\(error)"])
            return Self.answer(500, error: "the collector could not write its output")
        }
    }

    /// Says which ids a batch stored as conflicts (another record of the id, with other bytes,
    /// was stored first): the log ids and seqs, never a payload.
    private func logConflicts(in fresh: [ReceivedRecord]) {
        let conflicts = fresh.filter(\.conflict)
        let logs = Set(conflicts.map(\.logID)).sorted()
        logger.warning("records arrived under ids already stored with other bytes: stored as conflicts, under ids of their own",
                       metadata: ["conflicts": "\(conflicts.count)", "logs": "\(logs.prefix(8).joined(separator: ","))",
                                  "seqs": "\(conflicts.prefix(8).map { String($0.seq) }.joined(separator: ","))"])
    }

    /// 503 for a batch the log could not take or make durable (a full disk, a failed sync, a
    /// closed log): the sender retries, here or, behind a load balancer, at another collector.
    private func logFailed(_ error: any Error) -> Response {
        tallies.withLock { $0.stats.unstored += 1 }
        let code = (error as? SpoolError)?.code.description ?? "io"
        logger.error("collector log write failed", metadata: ["error": "\(error)"])
        return Self.answer(503, error: "the collector could not store the batch (\(code))", extra: [.retryAfter: "1"])
    }

    /// The body, at most ``CollectorConfiguration/maxBodyBytes`` long, arrived within
    /// ``CollectorConfiguration/bodyTimeout``, with no gap longer than
    /// ``CollectorConfiguration/bodyReadTimeout``, and at least as fast as
    /// ``CollectorConfiguration/minBodyBytesPerSecond`` after a grace of
    /// ``CollectorConfiguration/bodyReadTimeout`` (else 408, which gives back its bytes).
    private func readBody(_ request: Request, held: HeldBytes) async -> Result<[UInt8], BatchRejection> {
        let (total, gap, rate) = (configuration.bodyTimeout, configuration.bodyReadTimeout, configuration.minBodyBytesPerSecond)
        let clock = ContinuousClock()
        let start = clock.now
        let progress = BodyProgress(start)
        return await withTaskGroup(of: Result<[UInt8], BatchRejection>?.self) { group in
            group.addTask { await self.readWholeBody(request, held: held) { progress.arrived($0, at: clock.now) } }
            group.addTask {
                // Wakes at the nearest deadline until one has passed; nil when cancelled (the
                // read finished first). The rate's deadline moves a second later for each
                // `rate` bytes that arrive (Apache's mod_reqtimeout MinRate).
                while true {
                    let (last, bytes) = progress.state
                    let (stalled, tooSlow) = (last + gap, start + gap + .seconds(bytes) / rate)
                    let now = clock.now
                    if now >= start + total {
                        return .failure(BatchRejection(status: 408, message: "the body did not arrive within \(total)"))
                    }
                    if now >= stalled {
                        return .failure(BatchRejection(status: 408, message: "no byte of the body arrived for \(gap)"))
                    }
                    if now >= tooSlow {
                        return .failure(BatchRejection(status: 408, message: "the body arrived slower than \(rate) bytes per second"))
                    }
                    do { try await clock.sleep(until: min(start + total, stalled, tooSlow)) } catch { return nil }
                }
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? .failure(BatchRejection(status: 408, message: "the body did not arrive within \(total)"))
        }
    }

    /// Reads the body, calling `arrived` with the bytes received after each piece, those
    /// counted in `held` as they arrive (503 when the budget has no room for them): a body
    /// holds what it has sent, never what it declared, so senders that declare much and send
    /// little hold little. A declared `Content-Length` past the limit is refused before any of it.
    private func readWholeBody(_ request: Request, held: HeldBytes, arrived: @Sendable (Int) -> Void) async -> Result<[UInt8], BatchRejection> {
        let limit = configuration.maxBodyBytes
        let tooLarge = BatchRejection(status: 413, message: "the body is larger than \(limit) bytes")
        let busy = BatchRejection(status: 503, message: "too many request bodies are being received")
        if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > limit {
            return .failure(tooLarge)
        }
        var body: [UInt8] = []
        do {
            for try await buffer in request.body {
                guard body.count + buffer.readableBytes <= limit else { return .failure(tooLarge) }
                guard held.reserve(upTo: body.count + buffer.readableBytes) else { return .failure(busy) }
                body += buffer.readableBytesView
                arrived(body.count)
            }
        } catch {
            return .failure(.badRequest("the body could not be read"))
        }
        return .success(body)
    }

    /// Checks the headers, decompresses the body and decodes its records.
    private func decodeBatch(_ request: Request, body: [UInt8], header: BatchHeader?) throws(BatchRejection) -> [ReceivedRecord] {
        guard let header else {
            throw .badRequest(Self.header(BatchHeader.name, in: request) == nil
                ? "missing Spool-Batch header" : "invalid Spool-Batch header; expected <32 lowercase hex digits>:<first seq>-<last seq>")
        }
        guard let format = BatchFormat(contentType: request.headers[.contentType], spoolEncoding: Self.header("spool-encoding", in: request)) else {
            throw BatchRejection(status: 415, message: "unsupported Content-Type or Spool-Encoding")
        }
        guard let coding = ContentCoding(header: request.headers[.contentEncoding]) else {
            throw BatchRejection(status: 415, message: "unsupported Content-Encoding")
        }
        let decoded: [UInt8]
        do {
            decoded = try BodyDecoder.decode(body, coding: coding, limit: configuration.maxDecodedBytes)
        } catch {
            switch error {
            case .tooLarge:
                throw BatchRejection(status: 413, message: "the decompressed body is larger than \(configuration.maxDecodedBytes) bytes")
            case .malformed(let why):
                throw .badRequest(why)
            }
        }
        tallies.withLock { $0.stats.decodedBytes += decoded.count }
        return try BatchDecoder.decode(decoded, format: format, header: header)
    }

    /// Counts a refused batch and answers it.
    private func reject(_ rejection: BatchRejection, header: BatchHeader?) -> Response {
        tallies.withLock { tallies in
            tallies.stats.rejectedBatches += 1
            // The count a client's header claims: saturating, as a header may claim up to 2^64.
            let claimed = header.map { Int(clamping: $0.count) } ?? 0
            let (sum, overflow) = tallies.stats.rejectedRecords.addingReportingOverflow(claimed)
            tallies.stats.rejectedRecords = overflow ? .max : sum
        }
        logger.debug("batch refused", metadata: ["status": "\(rejection.status)", "reason": "\(rejection.message)"])
        return Self.answer(rejection.status, error: rejection.message)
    }

    /// The value of a header that has no predefined name (`name` in lowercase).
    static func header(_ name: String, in request: Request) -> String? {
        request.headers.first { $0.name.canonicalName == name }?.value
    }

    static func answer(_ status: Int, error message: String, extra: HTTPFields = [:]) -> Response {
        answer(status, json: #"{"error":"\#(jsonEscaped(message))"}"#, extra: extra)
    }

    static func answer(_ status: Int, json: String, extra: HTTPFields = [:]) -> Response {
        var headers = extra
        headers[.contentType] = "application/json"
        return Response(status: .init(code: status), headers: headers, body: .init(byteBuffer: ByteBuffer(string: json)))
    }

    /// `text` escaped for use inside a JSON string.
    static func jsonEscaped(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count) + String(scalar.value, radix: 16)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}

/// When the last piece of a body arrived and how many bytes have, shared by its reader and
/// its deadlines.
private final class BodyProgress: Sendable {
    private let progress: Mutex<(last: ContinuousClock.Instant, bytes: Int)>

    init(_ start: ContinuousClock.Instant) { progress = Mutex((start, 0)) }

    var state: (last: ContinuousClock.Instant, bytes: Int) { progress.withLock { $0 } }

    func arrived(_ bytes: Int, at now: ContinuousClock.Instant) { progress.withLock { $0 = (now, bytes) } }
}
