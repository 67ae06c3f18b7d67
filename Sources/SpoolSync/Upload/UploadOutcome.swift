/// What an answer means for a batch: the policy of the worker, as a pure function.
enum UploadOutcome: Sendable {
    /// 2xx: the server stored the batch; commit it.
    case accepted
    /// Retry later with backoff (network, timeout, 408, 429, 5xx, unexpected statuses).
    case retry(SyncError)
    /// 413: split the batch; a lone record is refused.
    case tooLarge(SyncError)
    /// Another 4xx: a poison batch; split it until the refused records are alone.
    case rejected(SyncError)
    /// A configuration error that will not go away by retrying (credentials or a destination
    /// that does not exist, say): the worker stops. Nothing more is sent, nothing past this
    /// batch is committed, every waiting flush ends with the error, and the worker is stopped
    /// as by ``SyncWorker/stop()``.
    case fatal(SyncError)

    /// Classifies a server's answer.
    ///
    /// - Parameters:
    ///   - response: the answer.
    ///   - retryableStatuses: 4xx statuses retried rather than refused, besides 408 and 429,
    ///     which are always retried: they say "not now", never "not this batch".
    ///   - now: wall-clock seconds since 1970, to read a `Retry-After` date.
    static func classify(_ response: UploadResponse, retryableStatuses: Set<Int>, now: Double) -> UploadOutcome {
        let status = response.status
        let message = SyncError.serverMessage(response.body)
        let retryAfter = response.headers["retry-after"].flatMap { RetryAfter.parse($0, now: now) }
        /// The failure, with the server's message kept apart from ours (it may echo a payload).
        func failure(_ code: SyncError.Code, _ text: String, retryAfter: Duration? = nil) -> SyncError {
            var error = SyncError(code, text, status: status, retryAfter: retryAfter)
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
        case 400...499 where status == 408 || retryableStatuses.contains(status), 500...599:
            return .retry(failure(.serverError, "the server failed", retryAfter: retryAfter))
        case 400...499:
            return .rejected(failure(.rejected, "the server refused the batch"))
        default:
            return .retry(failure(.unexpectedResponse, "the server answered an unexpected status", retryAfter: retryAfter))
        }
    }

    /// Classifies a request that got no answer.
    static func failed(_ error: any Error) -> UploadOutcome {
        if let error = error as? SyncError { return .retry(error) }
        return .retry(SyncError(.network, "the request failed without an answer", cause: error))
    }
}
