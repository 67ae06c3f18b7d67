import Foundation
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

/// A real HTTP server on 127.0.0.1 for the tests: it answers every `POST` with what `handler`
/// says, given the request's path, headers and body and its index among all requests. A
/// handler may forward to the emulator (a proxy that loses answers, or checks tokens), play a
/// token endpoint, or answer a scripted status.
final class FrontServer: Sendable {
    typealias Handler = @Sendable (_ path: String, _ headers: [String: String], _ body: [UInt8], _ index: Int) async -> (Int, [UInt8])

    let port: Int
    private let group: ServiceGroup
    private let task: Task<Void, any Error>
    private let counter: Counter

    var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    init(_ handler: @escaping Handler) async throws {
        let router = Router()
        let box = Counter()
        self.counter = box
        router.on("**", method: .post) { request, context -> Response in
            let body = try await request.body.collect(upTo: 64 * 1024 * 1024)
            var headers: [String: String] = [:]
            for field in request.headers { headers[field.name.canonicalName] = field.value }
            let index = box.next()
            let (status, answer) = await handler(request.uri.path, headers, Array(body.readableBytesView), index)
            return Response(status: .init(code: status), headers: [.contentType: "application/json"],
                            body: .init(byteBuffer: ByteBuffer(bytes: answer)))
        }
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let logger = Logger(label: "front", factory: { _ in SwiftLogNoOpLogHandler() })
        let application = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                continuation.yield(channel.localAddress?.port ?? 0)
                continuation.finish()
            }, logger: logger)
        let group = ServiceGroup(configuration: .init(services: [application], logger: logger))
        self.group = group
        self.task = Task { try await group.run() }
        var bound = 0
        for await port in ports { bound = port }
        self.port = bound
    }

    /// Requests received so far.
    var received: Int { counter.value }

    func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await task.value
    }

    final class Counter: Sendable {
        private let state = Mutex(0)
        func next() -> Int {
            state.withLock { count in
                defer { count += 1 }
                return count
            }
        }
        var value: Int { state.withLock { $0 } }
    }
}
