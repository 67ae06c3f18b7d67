import AsyncHTTPClient
import CZlib
import CZstd
import Foundation
import NIOCore
import NIOHTTP1
import Testing
@testable import SpoolCollector

/// The answer to one request, or the network error that replaced it.
struct Answer: Sendable {
    var status: Int
    var headers: [String: String]
    var body: String

    /// A header's value, by case-insensitive name.
    func header(_ name: String) -> String? {
        headers.first { $0.key.lowercased() == name.lowercased() }?.value
    }
}

/// A running collector on 127.0.0.1 and an ephemeral port, with an AsyncHTTPClient client
/// (the client `spool sync` uses on Linux).
struct TestServer: Sendable {
    let collector: Collector
    let port: Int

    /// Starts a collector configured by `configure`.
    static func start(_ configure: (inout CollectorConfiguration) -> Void = { _ in }) async throws -> TestServer {
        var configuration = CollectorConfiguration()
        configure(&configuration)
        let collector = Collector(configuration: configuration)
        return TestServer(collector: collector, port: try await collector.start())
    }

    /// POSTs `body` to `/batch` with `headers`.
    func post(_ body: [UInt8], headers: [String: String], path: String = "/batch") async throws -> Answer {
        try await send(.POST, path: path, headers: headers, body: body)
    }

    /// POSTs a batch: sets `Spool-Batch` for `log` and `seqs`, and the content headers of `format`.
    func post(batch body: [UInt8], log: String = testLog, seqs: ClosedRange<UInt64>, format: TestFormat, coding: String? = nil) async throws -> Answer {
        var headers = format.headers
        headers["Spool-Batch"] = "\(log):\(seqs.lowerBound)-\(seqs.upperBound)"
        if let coding { headers["Content-Encoding"] = coding }
        return try await post(body, headers: headers)
    }

    /// Sends one request and collects the whole answer.
    func send(_ method: HTTPMethod, path: String = "/batch", headers: [String: String] = [:], body: [UInt8]? = nil) async throws -> Answer {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await testClient.execute(request, timeout: .seconds(60))
        var answerHeaders: [String: String] = [:]
        for header in response.headers { answerHeaders[header.name] = header.value }
        let bytes = try await response.body.collect(upTo: 16 << 20)
        return Answer(status: Int(response.status.code), headers: answerHeaders, body: String(buffer: bytes))
    }
}

/// The tests' HTTP client: a refused connection fails at once instead of being retried until
/// the request's deadline. Process-wide, never shut down.
let testClient: HTTPClient = {
    var configuration = HTTPClient.Configuration()
    configuration.connectionPool.retryConnectionEstablishment = false
    return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
}()

/// The log id the tests send from.
let testLog = "0123456789abcdef0123456789abcdef"
/// A second log.
let otherLog = "fedcba9876543210fedcba9876543210"

/// The three body layouts of the wire format.
enum TestFormat: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case json, ndjson, raw

    var headers: [String: String] {
        switch self {
        case .json: ["Content-Type": "application/json"]
        case .ndjson: ["Content-Type": "application/x-ndjson"]
        case .raw: ["Content-Type": "application/json", "Spool-Encoding": "raw"]
        }
    }

    var testDescription: String { rawValue }
}

/// The JSON text of the record `seq` used throughout the tests.
func sampleData(_ seq: UInt64) -> String {
    #"{"event":"tap","n":\#(seq),"tags":["a","b"],"text":"line \"\#(seq)\""}"#
}

/// The time stamp of record `seq`.
func sampleTime(_ seq: UInt64) -> Int64 { 1_700_000_000_000 + Int64(seq) }

/// A body of `format` holding the given records (`data` is JSON text).
func body(_ format: TestFormat, log: String = testLog, _ records: [(seq: UInt64, data: String)]) -> [UInt8] {
    func envelope(_ record: (seq: UInt64, data: String)) -> String {
        #"{"id":"\#(log)-\#(record.seq)","seq":\#(record.seq),"time":\#(sampleTime(record.seq)),"data":\#(record.data)}"#
    }
    switch format {
    case .json: return Array(("[" + records.map(envelope).joined(separator: ",") + "]").utf8)
    case .ndjson: return Array((records.map(envelope).joined(separator: "\n") + "\n").utf8)
    case .raw: return Array(("[" + records.map(\.data).joined(separator: ",") + "]").utf8)
    }
}

/// A body of `format` holding the sample records `seqs`.
func body(_ format: TestFormat, log: String = testLog, seqs: ClosedRange<UInt64>) -> [UInt8] {
    body(format, log: log, seqs.map { ($0, sampleData($0)) })
}

/// `bytes` compressed as one gzip member with zlib.
func gzip(_ bytes: [UInt8]) -> [UInt8] {
    var stream = z_stream()
    precondition(deflateInit2_(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK)
    defer { deflateEnd(&stream) }
    var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, UInt(bytes.count))) + 64)
    var input = bytes
    let status = input.withUnsafeMutableBufferPointer { inBuffer in
        output.withUnsafeMutableBufferPointer { outBuffer in
            stream.next_in = inBuffer.baseAddress
            stream.avail_in = UInt32(inBuffer.count)
            stream.next_out = outBuffer.baseAddress
            stream.avail_out = UInt32(outBuffer.count)
            return deflate(&stream, Z_FINISH)
        }
    }
    precondition(status == Z_STREAM_END)
    return Array(output[0..<Int(stream.total_out)])
}

/// `bytes` compressed as one zstd frame.
func zstd(_ bytes: [UInt8]) -> [UInt8] {
    var output = [UInt8](repeating: 0, count: ZSTD_compressBound(bytes.count))
    let size = output.withUnsafeMutableBytes { out in
        bytes.withUnsafeBytes { input in
            ZSTD_compress(out.baseAddress, out.count, input.baseAddress, input.count, 3)
        }
    }
    precondition(ZSTD_isError(size) == 0)
    return Array(output[0..<size])
}

/// A fresh directory under the temporary directory.
func temporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("spool-collector-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}
