import Foundation
import Spool
import Testing
@testable import SpoolCollector

/// `CollectorConfiguration.logDirectory`: records stored as origin records, durable before the
/// 200, 503 and an unhealthy `/healthz` when the log cannot be written; forwarded envelopes
/// keep their origin; bearer tokens.
@Suite struct CollectorLogTests {
    /// The origin records of the log in `directory`, read after the collector closed it.
    func originRecords(_ directory: String) throws -> [OriginRecord] {
        try withEventLog(directory: directory) { log in
            try log.readAll().compactMap { item -> OriginRecord? in
                guard case .record(let record) = item else { return nil }
                return try OriginRecord.decode(record.payload)
            }
        }
    }

    @Test func acceptedRecordsAreSyncedOriginRecordsBeforeTheAnswer() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let logPath = directory.appendingPathComponent("log").path
        let server = try await TestServer.start { $0.logDirectory = logPath }
        #expect(OriginRecord.storesOrigins(at: logPath))
        // Concurrent requests: each answer comes only once its records are durable.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for batch in 0..<8 {
                group.addTask {
                    let first = UInt64(batch * 10)
                    let answer = try await server.post(batch: body(.json, seqs: first...(first + 9)), seqs: first...(first + 9), format: .json)
                    #expect(answer.status == 200)
                    let log = try #require(server.collector.collectorLog.withLock { $0 })
                    #expect(log.syncedEnd >= 10, "answered before its records were synced")
                }
            }
            try await group.waitForAll()
        }
        let raw = try await server.post(batch: body(.raw, log: otherLog, seqs: 0...1), log: otherLog, seqs: 0...1, format: .raw)
        let repeated = try await server.post(batch: body(.json, seqs: 0...9), seqs: 0...9, format: .json)
        #expect(raw.status == 200 && repeated.body == #"{"accepted":0,"duplicates":10,"conflicts":0}"#)
        await server.collector.stop()

        let stored = try originRecords(logPath)
        #expect(stored.count == 82)
        let device = try #require(LogID(hex: testLog))
        #expect(Set(stored.filter { $0.log == device }.map(\.seq)) == Set(0..<80))
        let first = try #require(stored.first { $0.log == device && $0.seq == 3 })
        #expect(first.time == sampleTime(3))
        #expect(first.payload == Array(sampleData(3).utf8))
        #expect(first.id == "\(testLog)-3")
        let untimed = stored.filter { $0.log == LogID(hex: otherLog)! }
        #expect(untimed.map(\.time) == [nil, nil])
    }

    @Test func aLogThatCannotBeWrittenAnswers503AndHealthSaysSoUntilItCan() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let logPath = directory.appendingPathComponent("log").path
        let server = try await TestServer.start { $0.logDirectory = logPath }
        defer { FaultInjection.disarm(under: logPath) }
        #expect(try await server.send(.GET, path: "/healthz").status == 200)
        FaultInjection.arm(.write, under: logPath, times: 1_000_000, fault: .error(.noSpace))
        let refused = try await server.post(batch: body(.json, seqs: 0...4), seqs: 0...4, format: .json)
        #expect(refused.status == 503)
        #expect(refused.header("Retry-After") == "1")
        let unhealthy = try await server.send(.GET, path: "/healthz")
        #expect(unhealthy.status == 503)
        #expect(unhealthy.body.contains("diskFull"))
        // Space is back: the writer's retry stores the queued records, health returns, and the
        // retried batch is answered 200 (its records were kept: duplicates, now durable).
        FaultInjection.disarm(under: logPath)
        var healthy = false
        for _ in 0..<200 where !healthy {
            healthy = try await server.send(.GET, path: "/healthz").status == 200
            if !healthy { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(healthy)
        let retried = try await server.post(batch: body(.json, seqs: 0...4), seqs: 0...4, format: .json)
        #expect(retried.status == 200)
        #expect(server.collector.stats.unstored == 1)
        await server.collector.stop()
        #expect(Set(try originRecords(logPath).map(\.seq)) == Set(0...4))
    }

    @Test func aDirectoryWithAnotherLogIsRefused() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let logPath = directory.appendingPathComponent("device").path
        try withEventLog(directory: logPath) { log in _ = try log.appendBlocking(Array("x".utf8), durability: .synced) }
        let collector = Collector(configuration: { var c = CollectorConfiguration(); c.logDirectory = logPath; return c }())
        await #expect(throws: SpoolError.self) { _ = try await collector.start() }
        #expect(!OriginRecord.storesOrigins(at: logPath))
    }

    @Test func forwardedEnvelopesKeepTheirOrigin() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let out = directory.appendingPathComponent("out.ndjson").path
        let server = try await TestServer.start { $0.outputPath = out }
        // A collector log's records 0...2: two from one device, one from another, one binary.
        let envelopes = [
            #"{"id":"\#(otherLog)-0","seq":0,"time":5,"origin_id":"\#(testLog)-7","origin_seq":7,"origin_time":70,"data":{"a":1}}"#,
            #"{"id":"\#(otherLog)-1","seq":1,"time":6,"origin_id":"\#(testLog)-8","origin_seq":8,"data":"text"}"#,
            #"{"id":"\#(otherLog)-2","seq":2,"time":7,"origin_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-0","origin_seq":0,"origin_time":-1,"data_base64":"/wA="}"#,
        ]
        let batch = Array(("[" + envelopes.joined(separator: ",") + "]").utf8)
        let answer = try await server.post(batch: batch, log: otherLog, seqs: 0...2, format: .json)
        #expect(answer.body == #"{"accepted":3,"duplicates":0,"conflicts":0}"#)
        // The same origins again, through another collector's log: duplicates.
        let again = envelopes.map { $0.replacingOccurrences(of: otherLog, with: "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb") }
        let second = try await server.post(batch: Array(("[" + again.joined(separator: ",") + "]").utf8), log: "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", seqs: 0...2, format: .json)
        #expect(second.body == #"{"accepted":0,"duplicates":3,"conflicts":0}"#)
        await server.collector.stop()
        let records = server.collector.records()
        #expect(records.map(\.id) == ["\(testLog)-7", "\(testLog)-8", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-0"])
        #expect(records.map(\.time) == [70, nil, -1])
        #expect(records[0].data == #"{"a":1}"# && records[1].data == #""text""# && records[2].binary == [0xff, 0])
        let lines = try String(contentsOfFile: out, encoding: .utf8).split(separator: "\n")
        #expect(lines.first == #"{"id":"\#(testLog)-7","seq":7,"time":70,"data":{"a":1}}"#)
    }

    @Test func malformedOriginsAreRefused() async throws {
        let server = try await TestServer.start()
        func post(_ members: String) async throws -> Int {
            let envelope = #"{"id":"\#(otherLog)-0","seq":0,"time":5,\#(members)"data":1}"#
            return try await server.post(batch: Array("[\(envelope)]".utf8), log: otherLog, seqs: 0...0, format: .json).status
        }
        #expect(try await post(#""origin_id":"\#(testLog)-7","origin_seq":7,"#) == 200)
        #expect(try await post(#""origin_id":"\#(testLog)-7","origin_seq":8,"#) == 400)
        #expect(try await post(#""origin_id":"\#(testLog)-7","#) == 400)
        #expect(try await post(#""origin_id":"\#(testLog.uppercased())-7","origin_seq":7,"#) == 400)
        #expect(try await post(#""origin_id":"\#(testLog)7","origin_seq":7,"#) == 400)
        #expect(try await post(#""origin_seq":7,"#) == 400)
        #expect(try await post(#""origin_id":"\#(testLog)-7","origin_seq":7,"origin_time":"x","#) == 400)
        await server.collector.stop()
    }

    @Test func bearerTokensAreRequiredAndReReadWhenTheFileChanges() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let tokens = directory.appendingPathComponent("tokens").path
        try "# fleet A\nalpha-token-00001\n  beta.token/2-0001==  # trailing comment\n\n".write(toFile: tokens, atomically: true, encoding: .utf8)
        let server = try await TestServer.start {
            $0.authTokenFile = tokens
            $0.authTokenCheckInterval = .milliseconds(20)
        }
        func post(_ authorization: String?, seqs: ClosedRange<UInt64>) async throws -> Answer {
            var headers = TestFormat.json.headers
            headers["Spool-Batch"] = "\(testLog):\(seqs.lowerBound)-\(seqs.upperBound)"
            if let authorization { headers["Authorization"] = authorization }
            return try await server.post(body(.json, seqs: seqs), headers: headers)
        }
        let missing = try await post(nil, seqs: 0...1)
        #expect(missing.status == 401 && missing.header("WWW-Authenticate") == "Bearer")
        #expect(try await post("Bearer alpha-token-00002", seqs: 0...1).status == 401)
        #expect(try await post("Basic alpha-token-00001", seqs: 0...1).status == 401)
        #expect(!missing.body.contains("alpha"))
        #expect(try await post("Bearer alpha-token-00001", seqs: 0...1).status == 200)
        #expect(try await post("bearer  beta.token/2-0001==", seqs: 2...3).status == 200)
        #expect(try await server.send(.GET, path: "/healthz").status == 200, "health needs no token")
        // The file changes: the old token stops working, the new one starts.
        try "gamma-token-00001\n".write(toFile: tokens, atomically: true, encoding: .utf8)
        var switched = false
        for _ in 0..<200 where !switched {
            switched = try await post("Bearer alpha-token-00001", seqs: 4...4).status == 401
            if !switched { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(switched)
        #expect(try await post("Bearer gamma-token-00001", seqs: 4...5).status == 200)
        // A file that no longer parses keeps the tokens in force; reloading says why.
        try "gamma-token-00001\nnot a token\n".write(toFile: tokens, atomically: true, encoding: .utf8)
        await #expect(throws: SpoolError.self) { try await server.collector.reloadAuthTokens() }
        #expect(try await post("Bearer gamma-token-00001", seqs: 6...6).status == 200)
        await server.collector.stop()
        #expect(server.collector.records().map(\.seq) == Array(0...6))
        #expect(server.collector.stats.unauthorized == 4)
    }

    @Test func tokenFilesAreParsedStrictly() throws {
        let (a, c) = ("a-token-of-16-by", "c-token-0123456789==")
        #expect(try TokenFile.parse("\(a)\n#b\n \(c) # d\r\n\n", path: "t") == .tokens([.init(token: a), .init(token: c)]))
        let (log1, log2) = (String(repeating: "ab", count: 16), String(repeating: "0", count: 32))
        #expect(try TokenFile.parse("\(a) \(log1)\t\(log2)\n", path: "t") == .tokens([.init(token: a, grant: .logs([log1, log2]))]))
        #expect(throws: SpoolError.self) { try TokenFile.parse("\(a) \(log1.uppercased())\n", path: "t") }
        #expect(throws: SpoolError.self) { try TokenFile.parse("\(a) \(log1)0\n", path: "t") }
        #expect(try TokenFile.parse("# all out\n!revoke-all\n", path: "t") == .revokeAll)
        for bad in ["\(a) b\n", "==\n", "\(a)=b\n", "\n", "# none\n", "\(a)", "\(a)\n\(c)", "a-token-of-15-b\n", "!revoke-all\n\(a)\n"] {
            #expect(throws: SpoolError.self, "\(bad)") { try TokenFile.parse(bad, path: "t") }
        }
        #expect(try TokenFile.parse("\(a)\n# a comment being written", path: "t") == .tokens([.init(token: a)]), "a comment is no token")
        for (text, line) in [("good-token-000001\nsecret value\n", 2), ("good-token-000001\nsecret-15-bytes\n", 2),
                             ("good-token-000001\nsecret-being-wri", 2), ("!revoke-all\nsecret-token-00001\n", 1)] {
            do {
                _ = try TokenFile.parse(text, path: "t")
                Issue.record("\(line) parsed")
            } catch {
                #expect("\(error)".contains("line \(line)") && !"\(error)".contains("secret"), "\(error)")
            }
        }
    }
}
