import Foundation
import Spool
import SpoolSync

/// Publishes records to a Google Cloud Pub/Sub topic: one message per record, through the
/// REST API's `POST {endpoint}/v1/{topic}:publish`.
///
/// Each message's `data` is the record's exact bytes in base64 (binary records too); its
/// attributes are `id` (`<log id>-<seq>`, the record's id everywhere in Spool), `seq` and
/// `log`; with ``OrderingKey/log`` its `orderingKey` is the log's id.
///
/// A request holds at most 1,000 messages and 10,000,000 bytes of JSON (the API's limits),
/// and at most the worker's `maxBytes`. What the answers mean:
/// - 200 with one message id per message sent: accepted (a shorter list is retried).
/// - 429, 499, 500, 502, 503, 504, no answer, a timeout: retried with backoff. The messages
///   may have been published: their `id` attribute makes the repeat harmless. 429
///   (`RESOURCE_EXHAUSTED`), 503 (`UNAVAILABLE`), a proxy's 408 and a timeout are marked
///   `SyncError/overloaded`: the adaptive concurrency halves on them.
/// - 400: the request is refused; the worker splits it until the refused record is alone and
///   dead-letters it. A record too large for one message (10 MB once encoded) is refused the
///   same way without being sent.
/// - 401, 403, 404: the worker stops with `SyncError/Code/destinationRefused` naming the
///   topic and the status (credentials, permissions or a missing topic: no retry and no
///   dead letter changes them).
///
/// With an ordering key, at most one publish is in flight (``maxInFlight`` is 1) and a failed
/// one is retried before any later record is sent, as Google's clients do, so a subscription
/// with message ordering receives each log's records in seq order.
///
/// Thread safety: a value type of immutable parts; use from any task.
public struct PubSubSink: SyncSink {
    /// Whether messages carry an ordering key.
    public enum OrderingKey: String, Sendable, CaseIterable {
        /// The log's id: a subscription with message ordering receives each log's records in
        /// seq order.
        case log
        /// No key: publishes may overlap and arrive in any order (faster).
        case none
    }

    /// The most messages in one publish request (the API's limit).
    public static let maxMessagesPerRequest = 1000
    /// The most bytes of one publish request's JSON (the API's limit).
    public static let maxRequestBytes = 10_000_000
    /// The most bytes of one message once encoded (the API's limit).
    public static let maxMessageBytes = 10_000_000

    /// The topic, `projects/<project>/topics/<topic>`.
    public let topic: String
    /// Where the publish requests go.
    public let publishURL: URL
    let encoder: PublishEncoder
    let uploader: any Uploader
    let credentials: PubSubCredentials
    let logID: LogID
    let ordering: OrderingKey
    /// The log the sink publishes the records of, and whether it is a collector's: the
    /// worker unwraps its records with it.
    public let unwrapper: RecordUnwrapper?

    /// A sink publishing the records of log `logID` to `topic`.
    ///
    /// - Parameters:
    ///   - topic: `projects/<project>/topics/<topic>`.
    ///   - endpoint: the API's root; `nil` means `http://$PUBSUB_EMULATOR_HOST` when that is
    ///     set (as Google's client libraries do), else `https://pubsub.googleapis.com`.
    ///   - orderingKey: whether messages carry the log's id as their ordering key.
    ///   - credentials: how requests are authorised; `nil` means none when publishing to the
    ///     emulator, and otherwise the service-account key `GOOGLE_APPLICATION_CREDENTIALS` names.
    ///   - logID: the log the records come from.
    ///   - origins: whether the log is a collector's, whose records are `OriginRecord`s: then
    ///     each message carries the device record's id, seq, log, time and bytes (the worker
    ///     unwraps them once for every sink, by ``unwrapper``, into `OutgoingRecord`s; a record
    ///     that does not decode goes out under the collector log's id).
    ///   - environment: the variables read for the defaults.
    ///   - uploader: makes the transport for a URL (the publish endpoint, the token endpoint).
    /// - Throws: `SyncError/Code/invalidConfiguration` for a malformed topic or endpoint, or
    ///   a key file that cannot be read.
    public init(
        topic: String, endpoint: URL? = nil, orderingKey: OrderingKey = .none, credentials: PubSubCredentials? = nil,
        logID: LogID, origins: Bool = false, environment: [String: String] = ProcessInfo.processInfo.environment,
        uploader: @Sendable (URL) -> any Uploader = platformUploader(url:)
    ) throws(SyncError) {
        try Self.validate(topic: topic)
        let emulator = environment["PUBSUB_EMULATOR_HOST"].flatMap { $0.isEmpty ? nil : $0 }
        let root: URL
        if let endpoint {
            root = endpoint
        } else if let emulator {
            guard let url = URL(string: "http://\(emulator)"), url.host != nil else {
                throw SyncError(.invalidConfiguration, "PUBSUB_EMULATOR_HOST must be host:port, not \"\(emulator)\"")
            }
            root = url
        } else {
            root = URL(string: "https://pubsub.googleapis.com")!
        }
        guard let scheme = root.scheme, ["http", "https"].contains(scheme), root.host != nil,
              let publish = URL(string: root.absoluteString.trimmingSuffix("/") + "/v1/\(topic):publish")
        else {
            throw SyncError(.invalidConfiguration, "the Pub/Sub endpoint must be an http or https URL")
        }
        if let credentials {
            self.credentials = credentials
        } else if endpoint == nil, emulator != nil {
            self.credentials = .unauthenticated
        } else {
            self.credentials = try .fromEnvironment(environment, uploader: uploader)
        }
        self.topic = topic
        self.publishURL = publish
        self.uploader = uploader(publish)
        self.logID = logID
        self.ordering = orderingKey
        self.unwrapper = RecordUnwrapper(logID: logID, origins: origins)
        self.encoder = PublishEncoder(logID: logID, orderingKey: orderingKey == .log ? logID.description : nil)
    }

    /// One publish in flight with an ordering key; no limit of the sink's own without.
    public var maxInFlight: Int? { ordering == .log ? 1 : nil }

    /// The longest prefix of `records` whose publish request stays within `maxBytes`, 1,000
    /// messages and 10,000,000 bytes (at least one record).
    public func prepare(_ records: ArraySlice<OutgoingRecord>, maxBytes: Int) -> SinkRequest<PublishRequest> {
        let request = encoder.encode(records, maxBytes: min(maxBytes, Self.maxRequestBytes), maxCount: Self.maxMessagesPerRequest)
        return SinkRequest(body: request, count: request.messages, bytes: request.body.count)
    }

    /// The publish request for exactly `records`.
    public func prepare(exactly records: [OutgoingRecord]) -> SinkRequest<PublishRequest> {
        let request = encoder.encode(records[...], maxBytes: .max, maxCount: .max)
        return SinkRequest(body: request, count: request.messages, bytes: request.body.count)
    }

    /// Publishes and reads the answer.
    public func send(_ request: PublishRequest, timeout: Duration) async -> SinkOutcome {
        if request.messages == 1, request.largestMessage > Self.maxMessageBytes {
            return .rejected(SyncError(
                .rejected, "record \(request.batch.first) is \(request.largestMessage) bytes as a Pub/Sub message, past its limit of \(Self.maxMessageBytes)"))
        }
        var headers = ["Content-Type": "application/json"]
        do {
            if let token = try await credentials.token() { headers["Authorization"] = "Bearer \(token)" }
        } catch {
            return error.code == .destinationRefused ? .fatal(error) : .retry(error)
        }
        // Room for every message id (Pub/Sub's are decimal numbers of up to 20 digits).
        let upload = UploadRequest(batch: request.batch, headers: headers, body: request.body, timeout: timeout,
                                   maxResponseBytes: 64 + request.messages * 32)
        let response: UploadResponse
        do {
            response = try await uploader.upload(upload)
        } catch let error as SyncError {
            return .retry(error)
        } catch {
            return .retry(SyncError(.network, "the publish to \(topic) failed without an answer", cause: error))
        }
        return classify(response, expecting: request.messages)
    }

    /// What a publish answer means.
    func classify(_ response: UploadResponse, expecting messages: Int) -> SinkOutcome {
        let status = response.status
        // RESOURCE_EXHAUSTED (429, a quota) and UNAVAILABLE (503) say Pub/Sub is overloaded,
        // as does a proxy's 408; the adaptive concurrency halves on these.
        let overloaded = status == 429 || status == 503 || status == 408
        func failure(_ code: SyncError.Code, _ text: String) -> SyncError {
            var error = SyncError(code, text, status: status, overloaded: overloaded)
            let message = SyncError.serverMessage(response.body)
            if !message.isEmpty { error.serverMessage = message }
            return error
        }
        switch status {
        case 200:
            let ids = Self.messageIDCount(response.body)
            guard ids == messages else {
                return .retry(failure(.unexpectedResponse, "Pub/Sub answered \(ids.map(String.init) ?? "no list of") message ids for \(messages) messages published to \(topic)"))
            }
            return .accepted
        case 401, 403, 404:
            let why = status == 404 ? "does not know the topic" : "refused the credentials"
            return .fatal(failure(.destinationRefused, "Pub/Sub \(why) (\(topic))"))
        case 413:
            return .tooLarge(failure(.payloadTooLarge, "Pub/Sub refused the publish to \(topic) as too large"))
        case 429:
            return .retry(failure(.rateLimited, "Pub/Sub asked to slow down (\(topic))"))
        case 499, 500...599, 408:
            return .retry(failure(.serverError, "Pub/Sub failed the publish to \(topic)"))
        case 400...499:
            return .rejected(failure(.rejected, "Pub/Sub refused the publish to \(topic)"))
        default:
            return .retry(failure(.unexpectedResponse, "Pub/Sub answered an unexpected status for \(topic)"))
        }
    }

    /// How many ids the answer's `messageIds` holds; `nil` when the body is not such an answer.
    static func messageIDCount(_ body: [UInt8]) -> Int? {
        struct Answer: Decodable { var messageIds: [String] }
        return (try? JSONDecoder().decode(Answer.self, from: Data(body)))?.messageIds.count
    }

    /// Checks that `topic` reads `projects/<project>/topics/<topic>`, as the initializer
    /// requires, before anything is opened (`spool sync` refuses a malformed topic as a usage error).
    /// - Throws: `SyncError.Code.invalidConfiguration` quoting the topic.
    public static func validate(topic: String) throws(SyncError) {
        guard isValidTopic(topic) else {
            throw SyncError(.invalidConfiguration, "the Pub/Sub topic must read projects/<project>/topics/<topic>, not \"\(topic)\"")
        }
    }

    /// `projects/<project>/topics/<topic>`, with no empty part and nothing that would change
    /// the URL's path.
    static func isValidTopic(_ topic: String) -> Bool {
        let parts = topic.split(separator: "/", omittingEmptySubsequences: false)
        let allowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-_.~+%"))
        return parts.count == 4 && parts[0] == "projects" && parts[2] == "topics"
            && [parts[1], parts[3]].allSatisfy { !$0.isEmpty && $0.unicodeScalars.allSatisfy(allowed.contains) }
    }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        var text = self
        while text.hasSuffix(suffix) { text.removeLast(suffix.count) }
        return text
    }
}
