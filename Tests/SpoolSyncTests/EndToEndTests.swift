import Foundation
import Spool
import SpoolCollector
import Synchronization
import Testing
@testable import SpoolSync

/// The worker over real HTTP on 127.0.0.1: a real `EventLog` and consumer, the default uploader
/// (`HTTPClientUploader` on Linux), and the reference collector with injected faults.
@Suite(.serialized) struct EndToEndTests {
    /// Retries allowed where a flush must succeed: real HTTP can time out now and then even
    /// without injected faults (a loaded 2-core machine), and a retry is the designed answer.
    static let retries = 20

    /// A log in a fresh temporary directory, a collector, and the URL to post to.
    struct Rig {
        let directory: String
        let log: EventLog
        let collector: Collector
        let url: URL

        static func make(
            log logConfiguration: Configuration = .init(), maxConcurrentRequests: Int? = nil,
            _ configure: (inout FaultConfiguration) -> Void = { _ in }
        ) async throws -> Rig {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spool-sync-\(UUID().uuidString)").path
            let log = try EventLog.open(directory: directory, configuration: logConfiguration)
            var configuration = CollectorConfiguration()
            if let maxConcurrentRequests { configuration.maxConcurrentRequests = maxConcurrentRequests }
            configure(&configuration.faults)
            configuration.seed = 42
            let collector = Collector(configuration: configuration)
            let port = try await collector.start()
            return Rig(directory: directory, log: log, collector: collector, url: URL(string: "http://127.0.0.1:\(port)/batch")!)
        }

        /// Appends `count` records `{"n":<i>,...}` (written to the file before returning).
        func append(_ count: Int, from start: Int = 0, payload: (Int) -> String = { #"{"n":\#($0),"event":"screen_view"}"# }) async throws {
            var last: UInt64 = 0
            for index in start..<start + count { last = try log.append(Array(payload(index).utf8)) }
            if count > 0 { try await log.waitUntil(before: last + 1, is: .written) }
        }

        func worker(_ configure: (inout SyncConfiguration) -> Void = { _ in }) throws -> SyncWorker<ContinuousClock> {
            var configuration = SyncConfiguration.fastForTests
            configure(&configuration)
            return try SyncWorker(consumer: try log.consumer(named: "uploader"), url: url, configuration: configuration)
        }

        var receivedSeqs: [UInt64] { collector.records().map(\.seq) }

        func tearDown() async {
            await collector.stop()
            try? log.close()
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    @Test func manualFlushDeliversExactlyWhatWasAppendedInOrder() async throws {
        let rig = try await Rig.make()
        try await rig.append(230)
        let worker = try rig.worker()
        let results = Mutex<[String]>([])
        let report = await worker.dispatch(retries: Self.retries) { result in results.withLock { $0.append(result.name) } }
        #expect(report.failure == nil)
        #expect(report.records == 230)
        #expect(report.batches == 5)
        // A rare retried timeout may add an error before a good.
        #expect(results.withLock { $0 }.filter { !$0.hasPrefix("error") } == ["good", "good", "good", "good", "good", "noData"])
        let received = rig.collector.records()
        #expect(received.map(\.seq) == Array(0..<230))
        #expect(received.allSatisfy { $0.logID == rig.log.id.description })
        #expect(received[17].data == #"{"n":17,"event":"screen_view"}"#)
        #expect(try rig.log.consumer(named: "uploader").committed == 230)
        await worker.stop()
        await rig.tearDown()
    }

    @Test func faultsLoseNothingAndDuplicateNothing() async throws {
        let rig = try await Rig.make { faults in
            faults.failureRate = 0.3
            faults.rateLimitRate = 0.05  // answered with Retry-After: 1
            faults.resetRate = 0.05
            faults.latency = .milliseconds(1)
            faults.latencyJitter = .milliseconds(5)
        }
        try await rig.append(600)
        let worker = try rig.worker()
        await worker.start()
        try await rig.append(200, from: 600)
        let report = await worker.flush(retries: 10_000)
        #expect(report.failure == nil)
        try await eventually("everything delivered") { rig.receivedSeqs.count == 800 }
        #expect(rig.receivedSeqs == Array(0..<800))
        // The collector de-duplicates by id, so receivedSeqs cannot show a batch sent twice:
        // its count can. Faults are injected before a batch is stored, so none is.
        #expect(rig.collector.stats.duplicates == 0)
        let stats = await worker.stats
        let faults = rig.collector.stats.faults
        #expect(faults.failures + faults.rateLimited + faults.resets > 0)
        #expect(stats.retries >= faults.failures + faults.rateLimited)
        #expect(stats.failures[.rateLimited] == faults.rateLimited)
        #expect(stats.deadLettered == 0)
        await worker.stop()
        #expect(try rig.log.consumer(named: "uploader").committed == 800)
        await rig.tearDown()
    }

    /// Several requests in flight through latency, 503s, 429s with `Retry-After` and
    /// connection resets: every record arrives (once, after de-duplication by id), and the
    /// offset ends at the end.
    @Test(arguments: [SyncConfiguration.Concurrency.fixed(8), .adaptive(max: 8)])
    func concurrentRequestsThroughFaultsLoseNothing(concurrency: SyncConfiguration.Concurrency) async throws {
        let rig = try await Rig.make { faults in
            faults.failureRate = 0.15
            faults.rateLimitRate = 0.03  // answered with Retry-After: 1
            faults.resetRate = 0.05
            faults.latency = .milliseconds(5)
            faults.latencyJitter = .milliseconds(20)  // answers come back out of order
        }
        try await rig.append(1_000)
        let worker = try rig.worker {
            $0.maxBatchCount = 20
            $0.concurrency = concurrency
        }
        let report = await worker.flush(retries: 10_000)
        #expect(report.failure == nil)
        #expect(report.records == 1_000)
        #expect(rig.receivedSeqs.sorted() == Array(0..<1_000))
        #expect(Set(rig.receivedSeqs).count == rig.receivedSeqs.count)
        let stats = await worker.stats
        #expect(stats.peakConcurrency > 1)
        #expect(stats.requests > stats.batches)  // faults were met, and retried
        #expect(try rig.log.consumer(named: "uploader").committed == 1_000)
        await worker.stop()
        await rig.tearDown()
    }

    /// Against a collector that handles 3 requests at once and answers 503 past that, the
    /// adaptive concurrency backs off to what the server takes, and nothing is lost.
    @Test func adaptiveConcurrencySettlesWithinWhatTheCollectorTakes() async throws {
        let rig = try await Rig.make(maxConcurrentRequests: 3) { faults in
            faults.latency = .milliseconds(20)
        }
        try await rig.append(2_000)
        let worker = try rig.worker {
            $0.maxBatchCount = 10
            $0.concurrency = .adaptive(max: 16)
        }
        let report = await worker.flush(retries: 10_000)
        #expect(report.failure == nil)
        #expect(rig.receivedSeqs.sorted() == Array(0..<2_000))
        let stats = await worker.stats
        #expect(rig.collector.stats.overloaded > 0)  // it did probe past 3
        // At most one past the limit: the rare probe past the remembered ceiling.
        #expect(stats.concurrency <= 4)
        #expect(stats.peakConcurrency > 3)
        #expect(rig.collector.stats.overloaded < stats.requests / 5)  // no sawtooth of 503s
        #expect(stats.declaredCapacity == 3)  // the collector said so with every answer
        await worker.stop()
        await rig.tearDown()
    }

    /// `spool sync --once` with its defaults (adaptive ≤ 32, batches of 50, the default
    /// backoff) into a collector with 8 request slots (issue 34): a request past the slots is
    /// answered 503 and retried on its own, and nothing the collector stored is sent again but
    /// a hedge's copy. Before, each such 503 carried `Retry-After: 1`, which halted the window
    /// and re-sent what was in flight: 500 accepted requests for 400 batches, and 16 waits of
    /// the whole worker of 1 to 16 s.
    @Test func anAdaptiveDrainPastTheCollectorsSlotsSendsNothingStoredAgain() async throws {
        let rig = try await Rig.make(maxConcurrentRequests: 8) { faults in
            faults.latency = .milliseconds(5)
        }
        try await rig.append(20_000)
        let worker = try rig.worker {
            $0.backoff = Backoff()
            $0.requestTimeout = .seconds(30)
            $0.concurrency = .adaptive(max: 32)
        }
        let report = await worker.flush(retries: 10_000)
        #expect(report.failure == nil)
        #expect(rig.receivedSeqs.sorted() == Array(0..<20_000))
        let stats = await worker.stats
        #expect(rig.collector.stats.overloaded > 0)  // the window went past the slots
        // A 503 stored nothing; a copy of a stored batch comes from a hedge, or from a request
        // that failed otherwise (a timeout on a loaded machine) after the collector stored it.
        let otherFailures = stats.failures.filter { $0.key != .serverError }.values.reduce(0, +)
        #expect(rig.collector.stats.duplicates <= (stats.hedges + otherFailures) * 50, "\(stats)")
        await worker.stop()
        await rig.tearDown()
    }

    @Test func tooLargeBatchesAreSplitUntilTheyFit() async throws {
        let rig = try await Rig.make { $0.payloadTooLargeAbove = 2_000 }
        try await rig.append(100)
        let worker = try rig.worker()
        let report = await worker.flush(retries: Self.retries)
        #expect(report.failure == nil)
        #expect(report.records == 100)
        #expect(rig.receivedSeqs == Array(0..<100))
        #expect(await worker.stats.splits > 0)
        #expect(await worker.stats.deadLettered == 0)
        await worker.stop()
        await rig.tearDown()
    }

    @Test func poisonRecordGoesToTheDeadLetterLogAndTheRestArrive() async throws {
        let rig = try await Rig.make { $0.poisonMarker = "POISON" }
        try await rig.append(60) { $0 == 23 ? #"{"n":23,"tag":"POISON"}"# : #"{"n":\#($0)}"# }
        let worker = try rig.worker()
        let report = await worker.flush(retries: Self.retries)
        #expect(report.failure == nil)
        #expect(report.deadLettered == 1)
        #expect(rig.receivedSeqs == Array(0..<60).filter { $0 != 23 })
        await worker.stop()  // closes the dead-letter log

        let deadLetters = try EventLog.open(directory: DeadLetterLog.directory(logDirectory: rig.directory, consumer: "uploader"))
        let batch = try await deadLetters.consumer(named: "inspect").read(maxCount: 10, maxBytes: 1 << 20)
        #expect(batch.records.count == 1)
        // The record's exact bytes, with its identity in the source log.
        let stored = try OriginRecord.decode(batch.records.first?.payload ?? [])
        #expect(stored.id == "\(rig.log.id)-23")
        #expect(stored.payload == Array(#"{"n":23,"tag":"POISON"}"#.utf8))
        #expect(OriginRecord.storesOrigins(at: deadLetters.directory))
        try deadLetters.close()
        await rig.tearDown()
    }

    /// With no current key (the log opened with keys for reading only, as `spool sync
    /// --key-file` does), the dead-letter log still encrypts, with the highest key.
    @Test(arguments: [UInt32?(7), nil])
    func anEncryptedLogsRefusedRecordsAreEncryptedInTheDeadLetterLogToo(current: UInt32?) async throws {
        var configuration = Configuration()
        configuration.encryption = .init(keys: [7: [UInt8](repeating: 0x5A, count: 32), 3: [UInt8](repeating: 0x3C, count: 32)], current: current)
        configuration.fileMode = 0o640
        let rig = try await Rig.make(log: configuration) { $0.poisonMarker = "POISON" }
        try await rig.append(10) { $0 == 4 ? #"{"n":4,"tag":"POISON-SECRET"}"# : #"{"n":\#($0)}"# }
        let worker = try rig.worker()
        #expect(await worker.flush(retries: Self.retries).deadLettered == 1)
        await worker.stop()  // closes the dead-letter log

        let directory = DeadLetterLog.directory(logDirectory: rig.directory, consumer: "uploader")
        let segments = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".seg") }
        #expect(!segments.isEmpty)
        for name in segments {
            let bytes = Array(FileManager.default.contents(atPath: directory + "/" + name) ?? Data())
            #expect(!bytes.isEmpty)
            #expect(firstRange(of: Array("POISON-SECRET".utf8), in: bytes) == nil)
            let mode = (try FileManager.default.attributesOfItem(atPath: directory + "/" + name)[.posixPermissions] as? NSNumber)?.uint16Value
            #expect(mode == 0o640)
        }
        // Encrypted: readable with the source log's keys, and only with them.
        let keyless = try EventLog.open(directory: directory)
        #expect { _ = try keyless.readAll() } throws: { ($0 as? SpoolError)?.code == .missingKey }
        try keyless.close()
        let deadLetters = try EventLog.open(directory: directory, configuration: DeadLetterLog.configuration(from: configuration))
        let payloads = try deadLetters.readAll().compactMap { item -> [UInt8]? in
            if case .record(let record) = item { return try? OriginRecord.decode(record.payload).payload }
            return nil
        }
        #expect(payloads == [Array(#"{"n":4,"tag":"POISON-SECRET"}"#.utf8)])
        try deadLetters.close()
        await rig.tearDown()
    }

    @Test func theDeadLetterLogTakesItsSourcesCapWithDropOldest() {
        var source = Configuration()
        source.segmentSize = 1 << 20
        source.maxBytes = 8 << 20
        source.capPolicy = .rejectNew
        let deadLetters = DeadLetterLog.configuration(from: source)
        #expect(deadLetters.maxBytes == 8 << 20)
        #expect(deadLetters.segmentSize == 1 << 20)
        #expect(deadLetters.capPolicy == .dropOldest)
        #expect(DeadLetterLog.configuration(from: Configuration()).maxBytes == nil)
    }

    @Test(arguments: HTTPSink.Encoding.allCases, HTTPSink.Compression.allCases)
    func everyEncodingAndCompressionArrivesIntact(encoding: HTTPSink.Encoding, compression: HTTPSink.Compression) async throws {
        let rig = try await Rig.make()
        try await rig.append(120) { $0 % 3 == 0 ? "plain \"text\" \($0)\n" : #"{"n":\#($0),"s":"é☃"}"# }
        let worker = try rig.worker {
            $0.http.encoding = encoding
            $0.http.compression = compression
        }
        let report = await worker.flush(retries: Self.retries)
        #expect(report.failure == nil)
        let received = rig.collector.records()
        #expect(received.map(\.seq) == Array(0..<120))
        #expect(received[1].data == #"{"n":1,"s":"é☃"}"#)
        // Text that is not JSON arrives as its exact bytes, never as a quoted JSON string.
        #expect(try BinaryPayloadTests.bytes(of: received[3]) == Array("plain \"text\" 3\n".utf8))
        #expect(received[3].data == nil)
        #expect(received.allSatisfy { ($0.time == nil) == (encoding == .raw) })
        await worker.stop()
        await rig.tearDown()
    }

    @Test func countAndIntervalTriggersDeliverWithoutAFlushCall() async throws {
        let rig = try await Rig.make()
        let worker = try rig.worker {
            $0.flushCount = 25
            $0.flushInterval = .zero
        }
        await worker.start()
        try await rig.append(25)
        try await eventually("count-triggered flush") { rig.receivedSeqs.count == 25 }

        await worker.setFlushInterval(.milliseconds(50))
        try await rig.append(3, from: 25)
        try await eventually("interval flush") { rig.receivedSeqs.count == 28 }
        #expect(rig.receivedSeqs == Array(0..<28))
        await worker.stop()
        await rig.tearDown()
    }

    @Test func pauseHoldsRecordsUntilResume() async throws {
        let rig = try await Rig.make()
        let worker = try rig.worker { $0.flushInterval = .milliseconds(20) }
        await worker.start()
        await worker.pause()
        try await rig.append(5)
        try await Task.sleep(for: .milliseconds(200))
        #expect(rig.receivedSeqs.isEmpty)
        await worker.resume()
        try await eventually("flush after resume") { rig.receivedSeqs.count == 5 }
        await worker.stop()
        await rig.tearDown()
    }

    @Test func whatAPreviousRunLeftIsSentOnLaunch() async throws {
        let rig = try await Rig.make()
        try await rig.append(40)
        let directory = rig.directory
        try rig.log.close()

        let reopened = try EventLog.open(directory: directory)
        let worker = try SyncWorker(consumer: try reopened.consumer(named: "uploader"), url: rig.url, configuration: .fastForTests)
        await worker.start()
        let consumer = try reopened.consumer(named: "uploader")
        try await eventually("launch flush") { consumer.committed == 40 }
        #expect(rig.receivedSeqs == Array(0..<40))
        await worker.stop()
        try reopened.close()
        await rig.tearDown()
    }

    @Test func deadlineLeavesNoRequestStartedTooLate() async throws {
        let rig = try await Rig.make()
        try await rig.append(10)
        let worker = try rig.worker { $0.requestTimeout = .seconds(5) }
        let tooShort = await worker.flush(within: .milliseconds(500))  // < SyncConfiguration.minimumRequestTime
        #expect(tooShort.deadlineReached)
        #expect(rig.receivedSeqs.isEmpty)
        let enough = await worker.flush(within: .seconds(60), retries: Self.retries)
        #expect(!enough.deadlineReached)
        #expect(enough.records == 10)
        await worker.stop()
        await rig.tearDown()
    }

    @Test func hangingServerTimesOutAndNothingIsCommitted() async throws {
        let rig = try await Rig.make { $0.latency = .milliseconds(800) }
        try await rig.append(5)
        let worker = try rig.worker { $0.requestTimeout = .milliseconds(100) }
        let report = await worker.flush(retries: 2)
        #expect(report.failure?.code == .timeout)
        #expect(await worker.stats.failures[.timeout] == 3)
        #expect(try rig.log.consumer(named: "uploader").committed == 0)
        await worker.stop()
        await rig.tearDown()
    }

    @Test func unreachableServerIsAClearRetryableError() async throws {
        let rig = try await Rig.make()
        try await rig.append(5)
        await rig.collector.stop()
        let worker = try rig.worker()
        let report = await worker.flush()
        #expect(report.failure?.code.isRetryable == true)
        #expect(try rig.log.consumer(named: "uploader").committed == 0)
        await worker.stop()
        await rig.tearDown()
    }
}

extension SyncConfiguration {
    /// Short waits for tests: a low interval floor, millisecond backoffs, short timeouts.
    static var fastForTests: SyncConfiguration {
        var configuration = SyncConfiguration()
        configuration.minimumFlushInterval = .milliseconds(10)
        configuration.flushInterval = .zero
        configuration.requestTimeout = .seconds(2)
        configuration.backoff = Backoff(base: .milliseconds(5), factor: 2, cap: .milliseconds(50))
        return configuration
    }
}

/// Where `needle` first occurs in `haystack`, if it does.
private func firstRange(of needle: [UInt8], in haystack: [UInt8]) -> Int? {
    guard needle.count <= haystack.count else { return nil }
    return (0...(haystack.count - needle.count)).first { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
}
