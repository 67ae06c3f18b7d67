import Foundation
import Testing

/// What a `spool collector` process does with a request it refuses before reading its body,
/// and with framing it does not apply (issue 53, item 4).
@Suite struct EarlyRefusalTests {
    /// `Transfer-Encoding: gzip, chunked` was answered 200 and its body stored as if gzip were
    /// not there: a transfer coding the collector does not apply is answered 501 (RFC 9112
    /// §6.1), and nothing is stored; plain `chunked` is still accepted.
    @Test func aTransferCodingTheCollectorDoesNotApplyIsAnswered501() async throws {
        let directory = temporaryDirectory()
        let out = directory + "/out.ndjson"
        let collector = try CollectorChild(["--out", out], stderrPath: directory + "/stderr")
        defer { collector.stop() }
        let log = String(repeating: "c", count: 32)
        func chunked(_ coding: String, seq: Int) -> String {
            let body = #"[{"id":"\#(log)-\#(seq)","seq":\#(seq),"time":0,"data":{"n":\#(seq)}}]"#
            return "POST /batch HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nSpool-Batch: \(log):\(seq)-\(seq)\r\n"
                + "Transfer-Encoding: \(coding)\r\n\r\n" + String(body.utf8.count, radix: 16) + "\r\n" + body + "\r\n0\r\n\r\n"
        }
        let port = collector.port
        let (gzipChunked, plainChunked) = (chunked("gzip, chunked", seq: 0), chunked("chunked", seq: 1))
        let refused = await onThread {
            let socket = LoopbackSocket(port: port)
            return socket.send(gzipChunked) ? socket.answer() : LoopbackSocket.Answer([], closed: true)
        }
        #expect(refused.status == 501, "\(refused.head)")
        #expect(refused.body.contains("gzip"), "\(refused.body)")
        let accepted = await onThread {
            let socket = LoopbackSocket(port: port)
            return socket.send(plainChunked) ? socket.answer() : LoopbackSocket.Answer([], closed: true)
        }
        #expect(accepted.status == 200, "\(accepted.head)")
        collector.stop()
        #expect(try collectedLines(out).map(\.id) == ["\(log)-1"])
    }

    /// After a 401, a body of 10^12 declared bytes was read and dropped for 10 s (20 GiB on a
    /// whole core): past a small bound the answer says `Connection: close` and the connection
    /// is closed, so the client cannot push much more than its socket buffers hold.
    @Test func anUnauthorizedHugeBodyIsAnsweredAndClosedNotDrained() async throws {
        let collector = try Self.collectorWithAToken()
        defer { collector.stop() }
        let socket = LoopbackSocket(port: collector.port)
        let head = "POST /batch HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer wrong\r\nContent-Type: application/json\r\n"
            + "Spool-Batch: \(String(repeating: "d", count: 32)):0-0\r\nContent-Length: 1000000000000\r\n\r\n"
        #expect(socket.send(head))
        let cap = 256 << 20
        let pushed = Task {
            await onThread {
                let chunk = [UInt8](repeating: UInt8(ascii: " "), count: 64 * 1024)
                var sent = 0
                while sent < cap, socket.send(chunk) { sent += chunk.count }
                return sent
            }
        }
        let answer = await onThread { socket.answer() }
        #expect(answer.status == 401, "\(answer.head)")
        #expect(answer.header("Connection") == "close", "\(answer.head)")
        let sent = await pushed.value
        #expect(sent < 64 << 20, "the collector read \(sent) bytes of a refused body")
    }

    /// A declared length past `--max-body` is answered 413 at once, without a byte of the body,
    /// and the connection is closed rather than waiting for a body it will not read.
    @Test func aDeclaredLengthPastMaxBodyIsAnswered413AtOnceAndClosed() async throws {
        let directory = temporaryDirectory()
        let collector = try CollectorChild(["--max-body", "1000"], stderrPath: directory + "/stderr")
        defer { collector.stop() }
        let port = collector.port
        let (answer, closed) = await onThread {
            let socket = LoopbackSocket(port: port)
            _ = socket.send("POST /batch HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1001\r\n\r\n")
            let answer = socket.answer()
            return (answer, socket.closesByServer())
        }
        #expect(answer.status == 413, "\(answer.head)")
        #expect(answer.header("Connection") == "close", "\(answer.head)")
        #expect(closed)
    }

    /// A 401 whose small body was sent whole keeps its connection: the next request on it is
    /// answered too (only bodies past the bound are not drained).
    @Test func anUnauthorizedSmallBodyKeepsTheConnection() async throws {
        let collector = try Self.collectorWithAToken()
        defer { collector.stop() }
        let port = collector.port
        let log = String(repeating: "e", count: 32)
        let answers = await onThread {
            let socket = LoopbackSocket(port: port)
            return (0..<2).map { seq in
                socket.send(oneRecordRequest(log: log, seq: seq, extraHeaders: "Authorization: Bearer wrong\r\n")) ? socket.answer() : LoopbackSocket.Answer([], closed: true)
            }
        }
        #expect(answers.map(\.status) == [401, 401], "\(answers.map(\.head))")
        #expect(answers[0].header("Connection") == nil)
    }

    /// A request head NIO's parser refuses is answered 400 and counted in `requests`
    /// (`spool_collector_requests_total`), as every other answered request is.
    @Test func aMalformedHeadIsCountedAsARequest() async throws {
        let directory = temporaryDirectory()
        let collector = try CollectorChild(["--metrics-port", "0"], stderrPath: directory + "/stderr")
        defer { collector.stop() }
        let metricsPort = try await Self.metricsPort(collector)
        let port = collector.port
        let answer = await onThread {
            let socket = LoopbackSocket(port: port)
            return socket.send("POST /batch HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header: x\r\n\r\n") ? socket.answer() : LoopbackSocket.Answer([], closed: true)
        }
        #expect(answer.status == 400, "\(answer.head)")
        let metrics = try await MetricsEndpointTests.scrape(metricsPort, until: "spool_collector_requests_total", reaches: 1)
        #expect(MetricsEndpointTests.sample("spool_collector_requests_total", in: metrics) == 1)
    }

    /// A collector whose token file holds one token, which the tests never send.
    static func collectorWithAToken(_ name: String = #function) throws -> CollectorChild {
        let directory = temporaryDirectory(name)
        let tokens = directory + "/tokens"
        try "the-only-token-of-this-test\n".write(toFile: tokens, atomically: true, encoding: .utf8)
        return try CollectorChild(["--auth-token-file", tokens], stderrPath: directory + "/stderr")
    }

    /// The port of the collector's `metrics on http://127.0.0.1:PORT/metrics` line (waits up
    /// to 30 s for it: a hang guard).
    static func metricsPort(_ collector: CollectorChild) async throws -> Int {
        for _ in 0..<300 {
            if let range = collector.stderr.range(of: "metrics on http://127.0.0.1:[0-9]+", options: .regularExpression),
               let port = Int(collector.stderr[range].split(separator: ":").last ?? "") {
                return port
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw CollectorStartFailure(message: "no metrics line: \(collector.stderr)")
    }
}
