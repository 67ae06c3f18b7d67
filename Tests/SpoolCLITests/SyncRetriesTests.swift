import Foundation
import Testing

/// Issue 50, item 2: `--retries N` bounds the requests of one batch whatever path retries it,
/// with one request in flight, the default (adaptive, hedged) window, and a fixed four without
/// hedging. One batch of 50 records, against a server that always answers 500 and one that
/// never answers (`--timeout 0.5`). Before, against 500s, `--retries` 1, 2 and 5 made 3, 8 and
/// 31 retries with the default window (3, 8 and 13 with four in flight); with `--timeout 2`
/// against silence, 32 requests and 75 s instead of 6 requests.
@Suite struct SyncRetriesTests {
    static let windows: [[String]] = [["--concurrency", "1"], [], ["--concurrency", "4", "--hedge", "off"]]

    @Test(arguments: [StubbornServer.Behaviour.failing, .silent], [1, 2, 5])
    func retriesBoundTheRequestsOfOneBatch(server behaviour: StubbornServer.Behaviour, retries: Int) throws {
        for window in Self.windows {
            let dir = temporaryDirectory("retries-\(behaviour == .failing ? "500" : "silent")-\(retries)-\(window.joined())")
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let log = dir + "/log"
            let lines = (0..<50).map { #"{"n":\#($0)}"# }.joined(separator: "\n") + "\n"
            try #require(try SpoolBinary.run(["append", log], input: Data(lines.utf8)).status == 0)
            let server = try StubbornServer(behaviour)
            defer { server.stop() }

            let sync = try SpoolBinary.run(["sync", log, "--url", server.url, "--create", "--once", "--json", "--retries", "\(retries)", "--timeout", "0.5"] + window)
            let context = "\(behaviour), --retries \(retries) \(window.joined(separator: " ")): \(sync.stdout) \(sync.stderr)"
            #expect(sync.status == 1, "\(context)")
            let summary = try #require(try JSONSerialization.jsonObject(with: Data(sync.stdout.utf8)) as? [String: Any], "\(context)")
            let requests = try #require(summary["requests"] as? Int), hedges = try #require(summary["hedges"] as? Int)
            #expect(summary["retries"] as? Int == retries, "\(context)")
            #expect(requests - hedges == 1 + retries, "one request and --retries retries, hedges aside: \(context)")
            #expect(hedges <= 1, "at most one hedge for the batch: \(context)")
            // The server's threads may still be reading the last request the sync sent before it
            // exited: wait for it, 5 s at most.
            for _ in 0..<50 where server.requests < requests { usleep(100_000) }
            #expect(server.requests == requests, "the server saw \(server.requests) requests: \(context)")
            #expect(summary["records"] as? Int == 0)
        }
    }
}
