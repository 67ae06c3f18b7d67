/// What HTTP answers mean: the HTTP sink's own words, turned into the neutral ``SinkOutcome``.
extension HTTPSink {
    /// What a server's answer means; a 429, 503 or 408 is marked ``SyncError/overloaded``.
    ///
    /// - Parameters:
    ///   - response: the answer.
    ///   - retryableStatuses: 4xx statuses retried rather than refused, besides 408 and 429,
    ///     which are always retried: they say "not now", never "not this batch".
    ///   - now: wall-clock seconds since 1970, to read a `Retry-After` date.
    static func outcome(of response: UploadResponse, retryableStatuses: Set<Int>, now: Double) -> SinkOutcome {
        let status = response.status
        let message = SyncError.serverMessage(response.body)
        let retryAfter = response.headers["retry-after"].flatMap { RetryAfter.parse($0, now: now) }
        // The server says it is overloaded: it asks to slow down, is unavailable, or gave up
        // waiting for the request. The adaptive concurrency halves on these.
        let overloaded = status == 429 || status == 503 || status == 408
        /// The failure, with the server's message kept apart from ours (it may echo a payload).
        func failure(_ code: SyncError.Code, _ text: String, retryAfter: Duration? = nil) -> SyncError {
            var error = SyncError(code, text, status: status, retryAfter: retryAfter, overloaded: overloaded)
            if !message.isEmpty { error.serverMessage = message }
            return error
        }
        switch status {
        case 200...299:
            return .accepted
        case 413:
            return .tooLarge(failure(.payloadTooLarge, "the server refused the batch as too large"))
        case 429:
            return .retry(failure(.rateLimited, "the server asked to slow down", retryAfter: retryAfter))
        case 401 where retryableStatuses.contains(status), 403 where retryableStatuses.contains(status),
             407 where retryableStatuses.contains(status):
            return .retry(failure(.unauthorized, Self.credentialsRefused(status), retryAfter: retryAfter))
        case 400...499 where status == 408 || retryableStatuses.contains(status), 500...599:
            return .retry(failure(.serverError, "the server failed", retryAfter: retryAfter))
        case 400...499:
            return .rejected(failure(.rejected, "the server refused the batch"))
        default:
            return .retry(failure(.unexpectedResponse, "the server answered an unexpected status", retryAfter: retryAfter))
        }
    }

    /// The header in which a server says how many requests it takes at once, answering 503
    /// past them: a Spool collector sends it with every answer, and any server may
    /// (<doc:SyncPoliciesAndWireFormat>).
    static let capacityHeader = "spool-max-concurrent-requests"

    /// The capacity `response` declares: its `Spool-Max-Concurrent-Requests`, 1 to 1,000,000
    /// in decimal digits; nil when absent or anything else (a value that does not parse says
    /// nothing, and changes nothing).
    static func declaredCapacity(of response: UploadResponse) -> Int? {
        guard let text = response.headers[capacityHeader], text.utf8.allSatisfy(isDigit),
              let capacity = Int(text), (1...1_000_000).contains(capacity)
        else { return nil }
        return capacity
    }

    /// What a 401, 403 or 407 says, naming the header to check.
    private static func credentialsRefused(_ status: Int) -> String {
        switch status {
        case 407: "the proxy refused the request's credentials (proxy authentication required): check the Proxy-Authorization header"
        case 403: "the server refused the request's credentials (forbidden): check the Authorization header"
        default: "the server refused the request's credentials (unauthorized): check the Authorization header"
        }
    }
}
