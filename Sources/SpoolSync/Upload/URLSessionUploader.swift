import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The default ``Uploader``: an HTTP `POST` of each body to one URL with `URLSession`.
///
/// Each request carries the worker's headers and its own timeout (`requestTimeout`, 30 s by
/// default). Redirects are followed by `URLSession`; every other answer is returned as it
/// is, for the worker to classify. Neither the body nor the answer is logged.
///
/// Thread safety: `Sendable`; one instance may serve several workers.
public struct URLSessionUploader: Uploader {
    /// Where bodies are posted.
    public let url: URL
    private let session: URLSession

    /// - Parameters:
    ///   - url: the collector's endpoint.
    ///   - session: the session to use. The default is an ephemeral session (no cookies,
    ///     no cache).
    public init(url: URL, session: URLSession? = nil) {
        self.url = url
        self.session = session ?? URLSession(configuration: .ephemeral)
    }

    public func upload(_ request: UploadRequest) async throws -> UploadResponse {
        var urlRequest = URLRequest(url: url)
        urlRequest.httpMethod = "POST"
        urlRequest.timeoutInterval = max(request.timeout.seconds, 0.001)
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        urlRequest.httpBody = Data(request.body)
        let (data, response) = try await session.data(for: urlRequest)
        guard let http = response as? HTTPURLResponse else {
            throw SyncError(.network, "the answer from \(url.host ?? "the server") is not HTTP")
        }
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
        }
        return UploadResponse(status: http.statusCode, headers: headers, body: Array(data.prefix(4096)))
    }
}
