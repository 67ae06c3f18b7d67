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
        let retryAfter = response.headers["retry-after"].flatMap { RetryAfter.parse($0, now: now) }
        var outcome = classify(status: status, retryAfter: retryAfter, retryableStatuses: retryableStatuses)
        if !message.isEmpty { outcome.error?.serverMessage = message }
        return outcome
    }

    /// The failure an answer's status makes, before the server's message is attached.
    private static func classify(status: Int, retryAfter: Duration?, retryableStatuses: Set<Int>) -> UploadOutcome {
        switch status {
        case 200...299:
            return .accepted
        case 413:
            return .tooLarge(SyncError(.payloadTooLarge, "the server refused the batch as too large", status: status))
        case 429:
            return .retry(SyncError(.rateLimited, "the server asked to slow down", status: status, retryAfter: retryAfter))
        case 400...499 where status == 408 || retryableStatuses.contains(status), 500...599:
            return .retry(SyncError(.serverError, "the server failed", status: status, retryAfter: retryAfter))
        case 400...499:
            return .rejected(SyncError(.rejected, "the server refused the batch", status: status))
        default:
            return .retry(SyncError(.unexpectedResponse, "the server answered an unexpected status", status: status, retryAfter: retryAfter))
        }
    }

    /// The error, for every outcome but ``accepted``.
    var error: SyncError? {
        get {
            switch self {
            case .accepted: nil
            case .retry(let error), .tooLarge(let error), .rejected(let error): error
            }
        }
        set {
            guard let newValue else { return }
            switch self {
            case .accepted: break
            case .retry: self = .retry(newValue)
            case .tooLarge: self = .tooLarge(newValue)
            case .rejected: self = .rejected(newValue)
            }
        }
    }

    /// Classifies a request that got no answer.
    static func failed(_ error: any Error) -> UploadOutcome {
        if let error = error as? SyncError { return .retry(error) }
        return .retry(SyncError(.network, "the request failed without an answer", cause: error))
    }
}
