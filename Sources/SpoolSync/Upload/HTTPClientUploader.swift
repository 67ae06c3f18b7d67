// AsyncHTTPClient is a dependency on Linux only (Package.swift): Apple platforms use
// URLSessionUploader and link no SwiftNIO. `os(Linux)`, the manifest's own condition, rather
// than `canImport`: on a Mac, a build that includes the tests builds AsyncHTTPClient for
// them, and `canImport` could then see it from SpoolSync, which does not link it.
#if os(Linux)
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// An ``Uploader`` over AsyncHTTPClient (SwiftNIO): an HTTP `POST` of each body to one URL.
/// The default on Linux.
///
/// Why not `URLSession` there: swift-corelibs-foundation's `URLSession` (over libcurl) has to
/// close every connection after each request (``URLSessionUploader`` explains the hang that
/// keep-alive causes), and cancelling its async API from a cancellation handler can deadlock;
/// AsyncHTTPClient keeps connections alive (a pool per host) and honours task cancellation.
///
/// Each request carries the worker's headers and its own timeout. The default client follows
/// no redirect (a collector answers, it does not redirect); every answer is returned as it is, for the
/// worker to classify, with at most the first 4 KiB of its body. Neither the body nor the
/// answer is logged.
///
/// Thread safety: `Sendable`; one instance may serve several workers.
public struct HTTPClientUploader: Uploader {
    /// Where bodies are posted.
    public let url: URL
    private let client: HTTPClient

    /// The client uploaders use unless given one: process-wide, never shut down (like
    /// AsyncHTTPClient's own `shared`), on NIO's singleton event loop group. It does not follow
    /// redirects, and a connection that cannot be made fails the request at once (the worker's
    /// own retries and backoff take it from there) instead of being retried until the request's
    /// deadline: a server that is down is reported as such, not as a timeout. It keeps up to
    /// 64 connections to a host, the most requests ``SyncConfiguration/concurrency`` allows.
    public static let defaultClient: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.timeout.connect = .seconds(10)
        // Room for a worker's most concurrent requests (64) without queueing inside the client.
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 64
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    /// An uploader that posts to `url` with AsyncHTTPClient.
    ///
    /// - Parameters:
    ///   - url: the collector's endpoint.
    ///   - client: the client to use. The default is ``defaultClient``, which follows no
    ///     redirect. A client that follows them never has a GET made from the POST taken for
    ///     an answer: the worker sees the 3xx. A redirect that re-sends the POST with its body
    ///     (307, 308) is followed, and the final answer counts.
    public init(url: URL, client: HTTPClient = HTTPClientUploader.defaultClient) {
        self.url = url
        self.client = client
    }

    /// Posts `request.body` with its headers to ``url`` and returns the answer, whatever its
    /// status, with at most the first 4 KiB of its body; `request.timeout` is given to
    /// AsyncHTTPClient as the request's timeout. When a client of the caller's followed a
    /// redirect that made the POST a GET, the first answer (the 3xx) is returned instead.
    /// - Throws: ``SyncError`` `.timeout` when no answer came in time, `.network` when the
    ///   request or the answer's body failed; `CancellationError` when the task was cancelled.
    public func upload(_ request: UploadRequest) async throws -> UploadResponse {
        var outgoing = HTTPClientRequest(url: url.absoluteString)
        outgoing.method = .POST
        for (name, value) in request.headers { outgoing.headers.add(name: name, value: value) }
        outgoing.body = .bytes(ByteBuffer(bytes: request.body))
        let host = url.host ?? "the server"
        let timeout = TimeAmount.nanoseconds(max(1, request.timeout.wholeNanoseconds))
        let response: HTTPClientResponse
        do {
            response = try await client.execute(outgoing, timeout: timeout)
        } catch let error as HTTPClientError where [.deadlineExceeded, .readTimeout, .connectTimeout].contains(error) {
            throw SyncError(.timeout, "no answer from \(host) in time", cause: error)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw SyncError(.network, "the request to \(host) failed", cause: error)
        }
        if response.history.count > 1, let first = response.history.first, response.history.last?.request.method != .POST {
            // A client given by the caller followed a redirect that turned the POST into a GET
            // without its body (301/302/303): that GET's 2xx must not commit the batch. The
            // first answer (the 3xx) is returned as if it had not been followed. A redirect
            // that kept the POST and its body (307/308) delivered the batch: its answer stands.
            return UploadResponse(status: Int(first.responseHead.status.code), headers: Self.headers(first.responseHead.headers), body: [])
        }
        let headers = Self.headers(response.headers)
        // Keep the start of the body: as much as the request asks for, never more.
        var body: [UInt8] = []
        let limit = max(0, request.maxResponseBytes)
        do {
            for try await chunk in response.body {
                body.append(contentsOf: chunk.readableBytesView.prefix(limit - body.count))
                if body.count >= limit { break }
            }
        } catch {
            throw SyncError(.network, "the answer from \(host) was cut off", cause: error)
        }
        return UploadResponse(status: Int(response.status.code), headers: headers, body: body)
    }

    private static func headers(_ fields: HTTPHeaders) -> [String: String] {
        var headers: [String: String] = [:]
        for header in fields { headers[header.name.lowercased()] = header.value }
        return headers
    }
}
#endif
