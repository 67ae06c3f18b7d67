/// What a destination's answer means for the records of one request: the only words a
/// ``SyncSink`` has to tell the worker's state machine what happened.
public enum SinkOutcome: Sendable {
    /// The destination durably took every record of the request (HTTP: a 2xx): commit them.
    case accepted
    /// Not now: retry later with backoff, honouring the error's `retryAfter` (HTTP: network,
    /// timeout, 408, 429, 5xx, unexpected statuses). The records may have landed: ids make
    /// the repeat harmless. The adaptive concurrency halves when the sink marked the error
    /// ``SyncError/overloaded`` (HTTP: a timeout, 408, 429, 503), and only then.
    case retry(SyncError)
    /// Too large (HTTP: 413): split the request; a lone record is refused (dead-lettered), and
    /// later requests stay smaller for a while.
    case tooLarge(SyncError)
    /// A poison request (HTTP: another 4xx): split it until the refused records are alone,
    /// and dead-letter those.
    case rejected(SyncError)
    /// A refusal no retry can change and no record is to blame for (credentials, permissions,
    /// a missing topic or table): the worker stops with this error, nothing committed past
    /// the request, and every waiting flush ends with it.
    case fatal(SyncError)

    /// What a request that got no answer means: a retry (the error as it is when it is a
    /// ``SyncError``, else a network error caused by it).
    static func failed(_ error: any Error) -> SinkOutcome {
        if let error = error as? SyncError { return .retry(error) }
        return .retry(SyncError(.network, "the request failed without an answer", cause: error))
    }
}
