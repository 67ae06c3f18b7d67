import _CryptoExtras
import Crypto
import Foundation
import Spool
import SpoolSync
import Synchronization

/// How publish requests are authorised: not at all (the emulator), or with an OAuth 2.0
/// access token obtained for a Google service account.
///
/// A service account's token comes from its JSON key (the file `GOOGLE_APPLICATION_CREDENTIALS`
/// names): a JWT signed with the key's RSA private key (RS256) is exchanged at the key's
/// `token_uri` for an access token (RFC 7523), which is cached and fetched again 5 minutes
/// before it expires. The key and the tokens never appear in logs or errors.
///
/// Thread safety: use from any task; concurrent publishes share one fetch of a token.
public struct PubSubCredentials: Sendable {
    private let source: TokenSource?

    private init(source: TokenSource?) { self.source = source }

    /// No `Authorization` header: for the emulator.
    public static let unauthenticated = PubSubCredentials(source: nil)

    /// A service account's token, from its JSON key.
    ///
    /// - Parameters:
    ///   - key: the key file's contents (`type`, `client_email`, `private_key`, `token_uri`).
    ///   - uploader: makes the transport for the token endpoint.
    /// - Throws: `SyncError/Code/invalidConfiguration` naming the field that is missing or
    ///   malformed (never its value).
    public static func serviceAccount(key: Data, uploader: @Sendable (URL) -> any Uploader = platformUploader(url:)) throws(SyncError) -> PubSubCredentials {
        let account = try ServiceAccountKey.parse(key)
        return PubSubCredentials(source: TokenSource(account: account, uploader: uploader(account.tokenURI)))
    }

    /// The service account whose key file `GOOGLE_APPLICATION_CREDENTIALS` names.
    ///
    /// - Throws: `SyncError/Code/invalidConfiguration` when the variable is not set or the
    ///   file cannot be read or parsed.
    static func fromEnvironment(_ environment: [String: String], uploader: @Sendable (URL) -> any Uploader) throws(SyncError) -> PubSubCredentials {
        guard let path = environment["GOOGLE_APPLICATION_CREDENTIALS"], !path.isEmpty else {
            throw SyncError(.invalidConfiguration,
                            "publishing to Pub/Sub needs credentials: set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file, or PUBSUB_EMULATOR_HOST for the emulator")
        }
        let key: Data
        do { key = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw SyncError(.invalidConfiguration, "the service-account key file \(path) cannot be read", cause: error)
        }
        return try serviceAccount(key: key, uploader: uploader)
    }

    /// The access token to send, fetched or refreshed when needed; `nil` for ``unauthenticated``.
    ///
    /// - Throws: `SyncError` from the token endpoint: `SyncError/Code/destinationRefused`
    ///   when it refused the key (a 4xx), a retryable code when it failed or did not answer.
    func token() async throws(SyncError) -> String? {
        guard let source else { return nil }
        return try await source.token()
    }
}

/// The fields of a service-account JSON key that the token flow needs.
struct ServiceAccountKey: Sendable {
    var clientEmail: String
    var privateKey: _RSA.Signing.PrivateKey
    var privateKeyID: String?
    var tokenURI: URL

    static func parse(_ data: Data) throws(SyncError) -> ServiceAccountKey {
        struct File: Decodable {
            var type: String?
            var client_email: String?
            var private_key: String?
            var private_key_id: String?
            var token_uri: String?
        }
        let file: File
        do { file = try JSONDecoder().decode(File.self, from: data) } catch {
            throw SyncError(.invalidConfiguration, "the service-account key is not a JSON key file")
        }
        if let type = file.type, type != "service_account" {
            throw SyncError(.invalidConfiguration, "the key file is of type \"\(type)\", not \"service_account\"")
        }
        guard let email = file.client_email, !email.isEmpty else {
            throw SyncError(.invalidConfiguration, "the service-account key has no client_email")
        }
        guard let pem = file.private_key else { throw SyncError(.invalidConfiguration, "the service-account key has no private_key") }
        let key: _RSA.Signing.PrivateKey
        do { key = try _RSA.Signing.PrivateKey(pemRepresentation: pem) } catch {
            throw SyncError(.invalidConfiguration, "the service-account key's private_key is not an RSA private key in PEM")
        }
        guard let uri = file.token_uri.flatMap(URL.init(string:)), let scheme = uri.scheme, ["http", "https"].contains(scheme), uri.host != nil else {
            throw SyncError(.invalidConfiguration, "the service-account key has no http or https token_uri")
        }
        return ServiceAccountKey(clientEmail: email, privateKey: key, privateKeyID: file.private_key_id, tokenURI: uri)
    }

    /// The signed JWT asking for a Pub/Sub token, valid from `now` for an hour.
    func assertion(now: Date) throws(SyncError) -> String {
        let issued = Int(now.timeIntervalSince1970)
        var header: [String: String] = ["alg": "RS256", "typ": "JWT"]
        if let privateKeyID { header["kid"] = privateKeyID }
        let claims: [String: Any] = [
            "iss": clientEmail, "scope": "https://www.googleapis.com/auth/pubsub",
            "aud": tokenURI.absoluteString, "iat": issued, "exp": issued + 3600,
        ]
        do {
            let input = Base64URL.encode(try JSONSerialization.data(withJSONObject: header, options: .sortedKeys))
                + "." + Base64URL.encode(try JSONSerialization.data(withJSONObject: claims, options: .sortedKeys))
            let signature = try privateKey.signature(for: Data(input.utf8), padding: .insecurePKCS1v1_5)
            return input + "." + Base64URL.encode(signature.rawRepresentation)
        } catch {
            throw SyncError(.invalidConfiguration, "signing the token request with the service-account key failed", cause: error)
        }
    }
}

/// Fetches and caches one service account's access token.
final class TokenSource: Sendable {
    /// A token is fetched again this long before it expires.
    static let refreshMargin: TimeInterval = 300

    private struct Cached {
        var token: String
        var expires: Date
    }

    private let account: ServiceAccountKey
    private let uploader: any Uploader
    private let cached = Mutex<Cached?>(nil)
    /// The fetch in flight, shared by every publish waiting for a token.
    private let fetching = Mutex<Task<Cached, any Error>?>(nil)

    init(account: ServiceAccountKey, uploader: any Uploader) {
        self.account = account
        self.uploader = uploader
    }

    func token() async throws(SyncError) -> String {
        if let cached = cached.withLock({ $0 }), cached.expires.timeIntervalSinceNow > Self.refreshMargin {
            return cached.token
        }
        let task = fetching.withLock { fetching -> Task<Cached, any Error> in
            if let fetching { return fetching }
            let task = Task { [account, uploader] in try await Self.fetch(account, uploader) }
            fetching = task
            return task
        }
        do {
            let fresh = try await task.value
            cached.withLock { $0 = fresh }
            fetching.withLock { if $0 == task { $0 = nil } }
            return fresh.token
        } catch {
            fetching.withLock { if $0 == task { $0 = nil } }
            if let error = error as? SyncError { throw error }
            throw SyncError(.network, "fetching an access token from \(account.tokenURI.host ?? "the token endpoint") failed", cause: error)
        }
    }

    private static func fetch(_ account: ServiceAccountKey, _ uploader: any Uploader) async throws -> Cached {
        let now = Date()
        let assertion = try account.assertion(now: now)
        let form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + assertion
        let request = UploadRequest(
            batch: BatchID(log: LogID(bytes: Array(repeating: 0, count: 16)), first: 0, last: 0),
            headers: ["Content-Type": "application/x-www-form-urlencoded"], body: Array(form.utf8), timeout: .seconds(30),
            maxResponseBytes: 64 * 1024)
        let endpoint = account.tokenURI.absoluteString
        let response: UploadResponse
        do {
            response = try await uploader.upload(request)
        } catch {
            // A dead or unreachable token_uri: the transport's error names only a host.
            let code = (error as? SyncError)?.code ?? .network
            throw SyncError(code, "the token endpoint \(endpoint) (the key's token_uri) did not answer", cause: error)
        }
        guard response.status == 200 else {
            var error = SyncError(
                (400...499).contains(response.status) && response.status != 408 && response.status != 429 ? .destinationRefused : .serverError,
                "the token endpoint \(endpoint) refused the service account \(account.clientEmail)", status: response.status)
            let message = SyncError.serverMessage(response.body)
            if !message.isEmpty { error.serverMessage = message }
            throw error
        }
        struct Answer: Decodable {
            var access_token: String
            var expires_in: Double?
        }
        guard let answer = try? JSONDecoder().decode(Answer.self, from: Data(response.body)), !answer.access_token.isEmpty else {
            throw SyncError(.unexpectedResponse, "the token endpoint \(endpoint) answered without an access_token", status: 200)
        }
        let lifetime = min(max(answer.expires_in ?? 3600, 0), 86_400)
        return Cached(token: answer.access_token, expires: now.addingTimeInterval(lifetime))
    }
}

/// Base64url without padding (RFC 7515 §2), as JWTs spell their parts.
enum Base64URL {
    static func encode(_ data: Data) -> String {
        data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
