import _CryptoExtras
import Crypto
import Foundation
import Spool
import SpoolServers
import SpoolPubSub
import Synchronization
import Testing
@testable import SpoolSync

/// The Pub/Sub sink against the real emulator from the Google Cloud CLI, and against real HTTP
/// servers on 127.0.0.1 that play a token endpoint, a proxy that loses answers after the
/// emulator published, and a Pub/Sub that answers each error status.
@Suite(.serialized) struct PubSubSinkTests {
    static let project = "projects/spool-test"

    /// A log in a fresh temporary directory, with `count` records appended: JSON objects, and
    /// every seventh record bytes that are not UTF-8 (the record's number in them).
    struct Rig {
        let directory: String
        let log: EventLog

        static func make(records count: Int, offset: Int = 0) async throws -> Rig {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spool-pubsub-\(UUID().uuidString)").path
            var configuration = Configuration()
            configuration.maxRecordSize = 8 * 1024 * 1024  // room for a record past Pub/Sub's message limit
            let log = try EventLog.open(directory: directory, configuration: configuration)
            let rig = Rig(directory: directory, log: log)
            var last: UInt64 = 0
            for index in 0..<count { last = try log.append(Rig.payload(index + offset)) }
            if count > 0 { try await log.waitUntil(before: last + 1, is: .written) }
            return rig
        }

        static func payload(_ index: Int) -> [UInt8] {
            index % 7 == 3 ? [0xFF, 0xFE, 0x00] + Array(String(index).utf8) : Array(#"{"n":\#(index),"event":"tap"}"#.utf8)
        }

        func worker(_ sink: PubSubSink, _ configure: (inout SyncConfiguration) -> Void = { _ in }) throws -> SyncWorker<ContinuousClock> {
            var configuration = SyncConfiguration()
            configuration.flushInterval = .zero
            // The emulator is a JVM on a loaded 2-core machine: generous timeouts, quick retries.
            configuration.requestTimeout = .seconds(20)
            configuration.backoff = Backoff(base: .milliseconds(5), factor: 2, cap: .milliseconds(100))
            configure(&configuration)
            return try SyncWorker(consumer: try log.consumer(named: "pubsub"), sink: sink, configuration: configuration)
        }

        func tearDown() {
            try? log.close()
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    static func names(_ test: String) -> (topic: String, subscription: String) {
        let unique = "\(test)-\(UUID().uuidString.prefix(8).lowercased())"
        return ("\(project)/topics/t-\(unique)", "\(project)/subscriptions/s-\(unique)")
    }

    /// Every record arrives byte for byte with its id, seq and log attributes.
    @Test func everyRecordArrivesByteForByteWithItsIdentity() async throws {
        let emulator = try await PubSubEmulator.shared()
        let (topic, subscription) = Self.names("bytes")
        try await emulator.createTopic(topic, subscription: subscription)
        let rig = try await Rig.make(records: 2_345)
        defer { rig.tearDown() }
        let sink = try PubSubSink(topic: topic, endpoint: emulator.root, credentials: .unauthenticated, logID: rig.log.id)
        let worker = try rig.worker(sink) { $0.maxBatchCount = 1000; $0.concurrency = .adaptive(max: 8) }
        let report = await worker.flush(retries: 20)
        await worker.stop()
        #expect(report.failure == nil)
        #expect(report.records == 2_345)
        let messages = try await emulator.pullAll(subscription)
        let bySeq = Dictionary(messages.map { (UInt64($0.attributes?["seq"] ?? "") ?? .max, $0) }, uniquingKeysWith: { first, _ in first })
        #expect(bySeq.count == 2_345)
        for seq in 0..<UInt64(2_345) {
            let message = try #require(bySeq[seq])
            #expect(message.bytes == Rig.payload(Int(seq)))
            #expect(message.attributes?["id"] == rig.log.id.eventID(seq: seq))
            #expect(message.attributes?["log"] == rig.log.id.description)
            #expect(message.orderingKey == nil)
        }
        #expect(try rig.log.consumer(named: "pubsub").committed == 2_345)
    }

    /// A collector's log holding two records of one id with different bytes (the second a
    /// conflict, FORMAT.md §11): each is a message of its own, under its own id.
    @Test func aConflictOfACollectorsLogIsAMessageOfItsOwn() async throws {
        let emulator = try await PubSubEmulator.shared()
        let (topic, subscription) = Self.names("conflict")
        try await emulator.createTopic(topic, subscription: subscription)
        let rig = try await Rig.make(records: 0)
        defer { rig.tearDown() }
        let device = LogID.random()
        let first = OriginRecord(log: device, seq: 5, time: 1_700_000_000_000, payload: Array(#"{"phone":"a"}"#.utf8))
        let conflict = OriginRecord(log: device, seq: 5, time: 1_700_000_000_001, payload: Array(#"{"phone":"b"}"#.utf8), conflict: true)
        _ = try rig.log.append(first.encoded())
        let last = try rig.log.append(conflict.encoded())
        try await rig.log.waitUntil(before: last + 1, is: .written)
        let sink = try PubSubSink(topic: topic, endpoint: emulator.root, credentials: .unauthenticated, logID: rig.log.id, origins: true)
        let worker = try rig.worker(sink)
        let report = await worker.flush(retries: 20)
        await worker.stop()
        #expect(report.failure == nil)
        let messages = try await emulator.pullAll(subscription)
        #expect(messages.count == 2)
        let byID = Dictionary(messages.map { ($0.attributes?["id"] ?? "", $0.bytes) }, uniquingKeysWith: { first, _ in first })
        #expect(byID == [first.id: first.payload, conflict.id: conflict.payload])
        #expect(conflict.id.hasPrefix(device.eventID(seq: 5) + "~"))
    }

    /// With the log as ordering key, one publish is in flight whatever the concurrency asked,
    /// and a subscription with message ordering receives each log's records in seq order.
    @Test func anOrderingKeyKeepsEachLogsRecordsInSeqOrder() async throws {
        let emulator = try await PubSubEmulator.shared()
        let (topic, subscription) = Self.names("order")
        try await emulator.createTopic(topic, subscription: subscription, ordering: true)
        let first = try await Rig.make(records: 1_500)
        let second = try await Rig.make(records: 1_200, offset: 10_000)
        defer { first.tearDown(); second.tearDown() }
        for rig in [first, second] {
            let sink = try PubSubSink(topic: topic, endpoint: emulator.root, orderingKey: .log, credentials: .unauthenticated, logID: rig.log.id)
            #expect(sink.maxInFlight == 1)
            let worker = try rig.worker(sink) { $0.maxBatchCount = 100; $0.concurrency = .adaptive(max: 16) }
            let report = await worker.flush(retries: 20)
            let peak = await worker.stats.peakConcurrency
            #expect(peak <= 1)
            await worker.stop()
            #expect(report.failure == nil)
        }
        let messages = try await emulator.pullAll(subscription)
        for (rig, count) in [(first, 1_500), (second, 1_200)] {
            let key = rig.log.id.description
            let seqs = messages.filter { $0.orderingKey == key }.compactMap { $0.attributes?["seq"].flatMap { UInt64($0) } }
            #expect(seqs == Array(0..<UInt64(count)))
        }
    }

    /// A proxy publishes to the emulator and then loses every third answer (the client sees a
    /// 503 for a publish that happened): the records are sent again, so some arrive twice, and
    /// none is lost.
    @Test func lostAnswersGiveDuplicatesNeverLoss() async throws {
        let emulator = try await PubSubEmulator.shared()
        let (topic, subscription) = Self.names("lost")
        try await emulator.createTopic(topic, subscription: subscription)
        let proxy = try await FrontServer { path, _, body, index in
            guard let answer = try? await emulator.request("POST", path, body: body) else { return (502, []) }
            return index % 3 == 1 ? (503, Array(#"{"error":{"code":503}}"#.utf8)) : answer
        }
        let rig = try await Rig.make(records: 1_000)
        defer { rig.tearDown() }
        let sink = try PubSubSink(topic: topic, endpoint: proxy.url, credentials: .unauthenticated, logID: rig.log.id)
        let worker = try rig.worker(sink) { $0.maxBatchCount = 50; $0.concurrency = .fixed(1) }
        let report = await worker.flush(retries: 1_000)
        await worker.stop()
        await proxy.stop()
        #expect(report.failure == nil)
        let messages = try await emulator.pullAll(subscription)
        let ids = messages.compactMap { $0.attributes?["id"] }
        #expect(Set(ids) == Set((0..<UInt64(1_000)).map { rig.log.id.eventID(seq: $0) }))
        #expect(ids.count > 1_000, "lost answers were published: their repeats arrive too")
    }

    /// The service-account flow: a JWT signed with the key's private half (RS256) is exchanged at
    /// the key's `token_uri` (a server on 127.0.0.1 that checks the signature with the public
    /// half), and the token is cached: one exchange for many publishes, each carrying it.
    @Test func aServiceAccountKeyIsExchangedForACachedToken() async throws {
        let emulator = try await PubSubEmulator.shared()
        let (topic, subscription) = Self.names("jwt")
        try await emulator.createTopic(topic, subscription: subscription)
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let publicKey = key.publicKey
        let exchanges = Mutex(0)
        let wrongTokens = Mutex(0)
        let tokenServer = try await FrontServer { path, headers, body, _ in
            guard path == "/token" else {
                // The publish: only the issued token passes, then on to the emulator.
                guard headers["authorization"] == "Bearer token-for-tests" else {
                    wrongTokens.withLock { $0 += 1 }
                    return (401, [])
                }
                return (try? await emulator.request("POST", path, body: body)) ?? (502, [])
            }
            exchanges.withLock { $0 += 1 }
            guard JWTCheck.verify(form: body, publicKey: publicKey, email: "spool@spool-test.iam.gserviceaccount.com") else {
                return (400, Array(#"{"error":"invalid_grant"}"#.utf8))
            }
            return (200, Array(#"{"access_token":"token-for-tests","expires_in":3599,"token_type":"Bearer"}"#.utf8))
        }
        defer { Task { await tokenServer.stop() } }
        let keyFile = try JSONSerialization.data(withJSONObject: [
            "type": "service_account", "client_email": "spool@spool-test.iam.gserviceaccount.com",
            "private_key_id": "k1", "private_key": key.pemRepresentation, "token_uri": tokenServer.url.absoluteString + "/token",
        ])
        let rig = try await Rig.make(records: 500)
        defer { rig.tearDown() }
        let sink = try PubSubSink(topic: topic, endpoint: tokenServer.url, credentials: .serviceAccount(key: keyFile), logID: rig.log.id)
        let worker = try rig.worker(sink) { $0.maxBatchCount = 50; $0.concurrency = .fixed(4) }
        let report = await worker.flush(retries: 5)
        await worker.stop()
        #expect(report.failure == nil)
        #expect(report.batches == 10)
        #expect(exchanges.withLock { $0 } == 1)
        #expect(wrongTokens.withLock { $0 } == 0)
        #expect(try await emulator.pullAll(subscription).count == 500)

        // A key the endpoint refuses: the worker stops and says the token endpoint refused it.
        let other = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let badKey = try JSONSerialization.data(withJSONObject: [
            "type": "service_account", "client_email": "spool@spool-test.iam.gserviceaccount.com",
            "private_key": other.pemRepresentation, "token_uri": tokenServer.url.absoluteString + "/token",
        ])
        let refused = try PubSubSink(topic: topic, endpoint: tokenServer.url, credentials: .serviceAccount(key: badKey), logID: rig.log.id)
        let rig2 = try await Rig.make(records: 3)
        defer { rig2.tearDown() }
        let stopped = try rig2.worker(refused)
        let failed = await stopped.flush(retries: 5)
        #expect(failed.failure?.code == .destinationRefused)
        #expect(failed.failure?.message.contains("token endpoint") == true)
        #expect(await stopped.stats.fatalError?.code == .destinationRefused)
        #expect(try rig2.log.consumer(named: "pubsub").committed == 0)
        await stopped.stop()
    }

    /// A `token_uri` where nothing answers: the error names the token endpoint (issue #33: it
    /// named only the host, as if the publish itself had failed), and the sync retries.
    @Test func aDeadTokenEndpointIsNamedInTheError() async throws {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let keyFile = try JSONSerialization.data(withJSONObject: [
            "type": "service_account", "client_email": "spool@spool-test.iam.gserviceaccount.com",
            "private_key": key.pemRepresentation, "token_uri": "http://127.0.0.1:1/token",
        ])
        let rig = try await Rig.make(records: 3)
        defer { rig.tearDown() }
        let sink = try PubSubSink(topic: "\(Self.project)/topics/t", endpoint: URL(string: "http://127.0.0.1:1")!,
                                  credentials: .serviceAccount(key: keyFile), logID: rig.log.id)
        let worker = try rig.worker(sink)
        let report = await worker.flush(retries: 0)
        await worker.stop()
        let failure = try #require(report.failure)
        #expect(failure.code.isRetryable)
        #expect(failure.message.contains("token endpoint http://127.0.0.1:1/token"), "\(failure)")
    }

    /// What each answer of Pub/Sub means, from a server on 127.0.0.1 answering it.
    @Test(arguments: [401, 403, 404]) func credentialsPermissionsAndMissingTopicsStopTheWorker(status: Int) async throws {
        let server = try await FrontServer { _, _, _, _ in (status, Array(#"{"error":{"code":\#(status)}}"#.utf8)) }
        let rig = try await Rig.make(records: 20)
        defer { rig.tearDown() }
        let topic = "\(Self.project)/topics/missing"
        let worker = try rig.worker(try PubSubSink(topic: topic, endpoint: server.url, credentials: .unauthenticated, logID: rig.log.id))
        let report = await worker.flush(retries: 10)
        await server.stop()
        #expect(report.failure?.code == .destinationRefused)
        #expect(report.failure?.message.contains(topic) == true)
        #expect(report.failure?.status == status)
        #expect(report.failure.map { "\($0)".components(separatedBy: "HTTP \(status)").count } == 2, "the status once: \(String(describing: report.failure))")
        #expect(server.received == 1, "no retry and no split changes a refusal of the credentials or the topic")
        #expect(await worker.stats.deadLettered == 0)
        #expect(try rig.log.consumer(named: "pubsub").committed == 0)
        // Stopped for good: a later flush ends at once.
        #expect(await worker.flush().failure?.code == .stopped)
        await worker.stop()
    }

    @Test(arguments: [429, 499, 500, 502, 503, 504]) func retryableStatusesAreRetriedUntilAccepted(status: Int) async throws {
        let emulator = try await PubSubEmulator.shared()
        let (topic, subscription) = Self.names("retry\(status)")
        try await emulator.createTopic(topic, subscription: subscription)
        let server = try await FrontServer { path, _, body, index in
            index < 2 ? (status, []) : ((try? await emulator.request("POST", path, body: body)) ?? (502, []))
        }
        let rig = try await Rig.make(records: 30)
        defer { rig.tearDown() }
        let worker = try rig.worker(try PubSubSink(topic: topic, endpoint: server.url, credentials: .unauthenticated, logID: rig.log.id))
        let report = await worker.flush(retries: 5)
        await worker.stop()
        await server.stop()
        #expect(report.failure == nil)
        #expect(report.records == 30)
        #expect(try await emulator.pullAll(subscription).count == 30)
    }

    /// A 200 whose list of ids is shorter than the messages sent is not an acceptance.
    @Test func aShortListOfMessageIdsIsRetried() async throws {
        let server = try await FrontServer { _, _, _, index in
            index == 0 ? (200, Array(#"{"messageIds":["1"]}"#.utf8)) : (200, Array(#"{"messageIds":["1","2","3"]}"#.utf8))
        }
        let rig = try await Rig.make(records: 3)
        defer { rig.tearDown() }
        let worker = try rig.worker(try PubSubSink(topic: "\(Self.project)/topics/t", endpoint: server.url, credentials: .unauthenticated, logID: rig.log.id))
        let report = await worker.flush(retries: 3)
        await worker.stop()
        await server.stop()
        #expect(report.failure == nil)
        #expect(server.received == 2)
        #expect(await worker.stats.failures[.unexpectedResponse] == 1)
    }

    /// A 400 is narrowed to the refused record, which goes to the dead-letter log; the others
    /// are published. A record too large for one message is dead-lettered without being sent.
    @Test func aRefusedRecordIsDeadLetteredAndTheRestPublished() async throws {
        let published = Mutex<Set<String>>([])
        let server = try await FrontServer { _, _, body, _ in
            struct Body: Decodable { struct M: Decodable { var attributes: [String: String] }; var messages: [M] }
            let messages = (try? JSONDecoder().decode(Body.self, from: Data(body)).messages) ?? []
            if messages.contains(where: { $0.attributes["seq"] == "13" }) { return (400, Array(#"{"error":{"code":400}}"#.utf8)) }
            published.withLock { $0.formUnion(messages.compactMap { $0.attributes["seq"] }) }
            let ids = messages.indices.map { "\"\($0)\"" }.joined(separator: ",")
            return (200, Array(#"{"messageIds":[\#(ids)]}"#.utf8))
        }
        let rig = try await Rig.make(records: 40)
        defer { rig.tearDown() }
        _ = try rig.log.append(Array(repeating: UInt8(ascii: "x"), count: 7_600_000))  // 10.1 MB in base64
        let last = try rig.log.append(Array(#"{"after":"big"}"#.utf8))
        try await rig.log.waitUntil(before: last + 1, is: .written)
        let worker = try rig.worker(try PubSubSink(topic: "\(Self.project)/topics/t", endpoint: server.url, credentials: .unauthenticated, logID: rig.log.id)) {
            $0.maxBatchBytes = 16 * 1024 * 1024
        }
        let report = await worker.flush(retries: 3)
        await worker.stop()
        await server.stop()
        #expect(report.failure == nil)
        #expect(await worker.stats.deadLettered == 2)
        let expected: Set<String> = Set((0..<42).filter { $0 != 13 && $0 != 40 }.map { String($0) })
        #expect(published.withLock { $0 } == expected)
        let dead = try EventLog.open(directory: rig.directory + "/deadletter/pubsub")
        defer { try? dead.close() }
        let sizes: [Int] = try await dead.consumer(named: "check").read(maxCount: 10, maxBytes: 64 * 1024 * 1024).records.map(\.payload.count).sorted()
        // Each is stored as its exact bytes after the origin record's 38-byte header.
        #expect(sizes.count == 2 && sizes[0] < 1_000 && sizes[1] == 7_600_000 + OriginRecord.headerSize)
    }

    @Test func malformedTopicsAndEndpointsAreRefusedByName() throws {
        let log = LogID.random()
        for topic in ["topics/t", "projects/p/topics/", "projects/p/subscriptions/s", "projects/p/topics/t/x", "projects/p q/topics/t"] {
            #expect(throws: SyncError.self) { try PubSubSink(topic: topic, endpoint: URL(string: "http://127.0.0.1:1")!, credentials: .unauthenticated, logID: log) }
        }
        #expect(throws: SyncError.self) { try PubSubSink(topic: "projects/p/topics/t", endpoint: URL(string: "ftp://x")!, credentials: .unauthenticated, logID: log) }
        do {
            _ = try PubSubSink(topic: "projects/p/topics/t", logID: log, environment: [:])
            Issue.record("no credentials and no emulator must be refused")
        } catch {
            #expect(error.message.contains("GOOGLE_APPLICATION_CREDENTIALS"))
        }
        let emulator = try PubSubSink(topic: "projects/p/topics/t", logID: log, environment: ["PUBSUB_EMULATOR_HOST": "127.0.0.1:8085"])
        #expect(emulator.publishURL.absoluteString == "http://127.0.0.1:8085/v1/projects/p/topics/t:publish")
    }
}

/// Checks a JWT-bearer token request as Google's token endpoint does.
enum JWTCheck {
    static func verify(form: [UInt8], publicKey: _RSA.Signing.PublicKey, email: String) -> Bool {
        let text = String(decoding: form, as: UTF8.self)
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            if parts.count == 2 { fields[parts[0]] = parts[1].removingPercentEncoding }
        }
        guard fields["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer", let jwt = fields["assertion"] else { return false }
        let parts = jwt.split(separator: ".").map(String.init)
        guard parts.count == 3, let signature = decode(parts[2]), let claimsData = decode(parts[1]), let headerData = decode(parts[0]),
              let header = try? JSONSerialization.jsonObject(with: headerData) as? [String: Any],
              let claims = try? JSONSerialization.jsonObject(with: claimsData) as? [String: Any]
        else { return false }
        guard header["alg"] as? String == "RS256", claims["iss"] as? String == email,
              (claims["scope"] as? String)?.contains("pubsub") == true,
              let issued = claims["iat"] as? Int, let expires = claims["exp"] as? Int, expires > issued
        else { return false }
        let input = Data((parts[0] + "." + parts[1]).utf8)
        return publicKey.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: signature), for: input, padding: .insecurePKCS1v1_5)
    }

    static func decode(_ part: String) -> Data? {
        var base64 = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }
}
