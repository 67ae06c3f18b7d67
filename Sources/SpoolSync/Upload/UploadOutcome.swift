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
        let suffix = message.isEmpty ? "" : ": \(message)"
        let retryAfter = response.headers["retry-after"].flatMap { RetryAfter.parse($0, now: now) }
        switch status {
        case 200...299:
            return .accepted
        case 413:
            return .tooLarge(SyncError(.payloadTooLarge, "the server refused the batch as too large\(suffix)", status: status))
        case 429:
            return .retry(SyncError(.rateLimited, "the server asked to slow down\(suffix)", status: status, retryAfter: retryAfter))
        case 400...499 where status == 408 || retryableStatuses.contains(status), 500...599:
            return .retry(SyncError(.serverError, "the server failed\(suffix)", status: status, retryAfter: retryAfter))
        case 400...499:
            return .rejected(SyncError(.rejected, "the server refused the batch\(suffix)", status: status))
        default:
            return .retry(SyncError(.unexpectedResponse, "the server answered an unexpected status\(suffix)", status: status, retryAfter: retryAfter))
        }
    }

    /// Classifies a request that got no answer.
    static func failed(_ error: any Error) -> UploadOutcome {
        if let error = error as? SyncError { return .retry(error) }
        return .retry(SyncError(.network, "the request failed without an answer", cause: error))
    }
}
