import Dispatch
import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An ``Uploader`` posting each body to one URL with `URLSession`: the default on Apple
/// platforms. On Linux the default is ``HTTPClientUploader`` (see there why).
///
/// Each request carries the worker's headers and its own timeout (`requestTimeout`, 30 s by
/// default). Redirects are not followed (as by ``HTTPClientUploader``): `URLSession` would
/// resend a 301, 302 or 303 as a `GET` without its body, and the 2xx answering that `GET`
/// would commit a batch that was never delivered. A 3xx is returned as it is, like every
/// other answer, for the worker to classify (it is retried). Neither the body nor the answer
/// is logged.
///
/// The answer's body is kept up to its first 4 KiB only, but `URLSession` buffers it whole
/// before handing it over (capping it while it arrives needs a session-wide data delegate,
/// which a session passed in cannot be given): a server answering a huge body costs that much
/// memory for the request's lifetime.
///
/// On Linux (swift-corelibs-foundation over libcurl) connections are not reused by default:
/// when a server closes a kept-alive connection under a request, libcurl silently resends
/// the request on a new connection without its body, and the request then hangs until its
/// timeout. `Connection: close` avoids that at the cost of one connection per batch.
///
/// Thread safety: `Sendable`; one instance may serve several workers.
public struct URLSessionUploader: Uploader {
    #if canImport(FoundationNetworking)
    /// Whether connections are reused by default: `false` on Linux (see above), `true` elsewhere.
    public static let reusesConnectionsByDefault = false
    #else
    /// Whether connections are reused by default: `false` on Linux (see above), `true` elsewhere.
    public static let reusesConnectionsByDefault = true
    #endif

    /// Where bodies are posted.
    public let url: URL

    /// Ephemeral, with room for a worker's most concurrent requests (64) on one host.
    private static var defaultSessionConfiguration: URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = 64
        return configuration
    }
    /// Whether requests keep their connection alive for the next one.
    public let reusesConnections: Bool
    private let session: URLSession

    /// An uploader that posts to `url` with URLSession.
    ///
    /// - Parameters:
    ///   - url: the collector's endpoint.
    ///   - session: the session to use. The default is an ephemeral session (no cookies,
    ///     no cache) that opens up to 64 connections to the host, the most requests
    ///     ``SyncConfiguration/concurrency`` allows (URLSession's own default per host is lower,
    ///     6 on Apple platforms, which would queue the window's requests inside the session).
    ///     A session passed in keeps its own limit.
    ///   - reusesConnections: whether to keep connections alive between requests. The default
    ///     is ``reusesConnectionsByDefault``.
    public init(url: URL, session: URLSession? = nil, reusesConnections: Bool = Self.reusesConnectionsByDefault) {
        self.url = url
        self.session = session ?? URLSession(configuration: Self.defaultSessionConfiguration)
        self.reusesConnections = reusesConnections
    }

    /// Posts `request.body` with its headers to ``url`` and returns the answer, whatever its
    /// status (a redirect is not followed: the 3xx is the answer), with at most the first 4 KiB of
    /// its body; `request.timeout` is the request's timeout interval. Cancelling the task cancels
    /// the request.
    /// - Throws: ``SyncError`` `.timeout` when no answer came in time, `.network` when the answer
    ///   is not HTTP; URLSession's own error for any other failure.
    public func upload(_ request: UploadRequest) async throws -> UploadResponse {
        var urlRequest = URLRequest(url: url)
        urlRequest.httpMethod = "POST"
        urlRequest.timeoutInterval = max(request.timeout.seconds, 0.001)
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        if !reusesConnections { urlRequest.setValue("close", forHTTPHeaderField: "Connection") }
        urlRequest.httpBody = Data(request.body)
        let host = url.host ?? "the server"
        let handle = TaskHandle()
        // A completion-handler task rather than `data(for:)`: cancelling the async variant from
        // a task's cancellation handler can deadlock swift-corelibs-foundation's queues.
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<UploadResponse, any Error>) in
                let task = session.dataTask(with: urlRequest) { data, response, error in
                    if let error {
                        let timedOut = (error as? URLError)?.code == .timedOut
                        continuation.resume(throwing: timedOut ? SyncError(.timeout, "no answer from \(host) in time", cause: error) : error)
                        return
                    }
                    guard let http = response as? HTTPURLResponse else {
                        continuation.resume(throwing: SyncError(.network, "the answer from \(host) is not HTTP"))
                        return
                    }
                    var headers: [String: String] = [:]
                    for (name, value) in http.allHeaderFields {
                        if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
                    }
                    continuation.resume(returning: UploadResponse(status: http.statusCode, headers: headers, body: Array((data ?? Data()).prefix(max(0, request.maxResponseBytes)))))
                }
                task.delegate = RedirectRefuser.shared
                handle.start(task)
            }
        } onCancel: {
            handle.cancel()
        }
    }
}

/// Answers every redirect with "do not follow", so that the 3xx itself completes the task.
/// A task's own delegate, so it applies to a session passed in too; with a completion handler
/// it is asked about redirects only (on Linux as well), never given the data.
private final class RedirectRefuser: NSObject, URLSessionTaskDelegate, Sendable {
    static let shared = RedirectRefuser()

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}

/// The data task of one upload, cancelled from any thread without blocking it: the
/// cancellation itself runs on a Dispatch queue, never on the cooperative pool.
private final class TaskHandle: Sendable {
    private struct State {
        var task: URLSessionDataTask?
        var cancelled = false
    }

    private let state = Mutex(State())

    func start(_ task: URLSessionDataTask) {
        let cancelled = state.withLock { state -> Bool in
            state.task = task
            return state.cancelled
        }
        task.resume()
        if cancelled { Self.cancel(task) }
    }

    func cancel() {
        let task = state.withLock { state -> URLSessionDataTask? in
            state.cancelled = true
            return state.task
        }
        if let task { Self.cancel(task) }
    }

    private static func cancel(_ task: URLSessionDataTask) {
        DispatchQueue.global().async { task.cancel() }
    }
}
