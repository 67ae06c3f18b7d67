import Hummingbird

/// The request context of the collector's server: Hummingbird's basics, plus a way to drop
/// the connection without answering (the reset fault).
struct CollectorRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    /// Closes the request's connection; the answer the handler returns is never sent.
    let closeConnection: @Sendable () async -> Void

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        let channel = source.channel
        closeConnection = { try? await channel.close() }
    }
}

/// Hands every request, whatever its path, to ``Collector/handle(_:context:)``.
struct CollectorResponder: HTTPResponder {
    let collector: Collector

    func respond(to request: Request, context: CollectorRequestContext) async throws -> Response {
        await collector.handle(request, context: context)
    }
}
