import Foundation
import Spool
import Synchronization
import Testing
@testable import SpoolSync

/// The driver: the machine's actions carried out against an in-memory consumer and a scripted
/// transport, with time on a manual clock.
@Suite struct SyncWorkerTests {
    let clock = ManualClock()

    func worker(
        _ consumer: MemoryConsumer, _ uploader: ScriptedUploader, _ configuration: SyncConfiguration = .manual,
        deadLetters: MemoryDeadLetters? = nil, jitter: Double = 0
    ) throws -> SyncWorker<ManualClock> {
        try SyncWorker(
            consumer: consumer, uploader: uploader, configuration: configuration, deadLetters: deadLetters,
            clock: clock, random: { jitter }, wallClock: { 784_111_777 })
    }

    @Test func flushUploadsEncodedBatchesAndCommitsThem() async throws {
        let consumer = MemoryConsumer(records: 120)
        let uploader = ScriptedUploader()
        let report = try await worker(consumer, uploader).flush()
        #expect(report.batches == 3)
        #expect(report.records == 120)
        #expect(report.failure == nil)
        #expect(report.bytes == uploader.sent.reduce(0) { $0 + $1.body.count })
        #expect(consumer.committed == 120)
        #expect(consumer.commits == [50, 100, 120])
        let first = try #require(uploader.sent.first)
        #expect(first.headers["Spool-Batch"] == "000102030405060708090a0b0c0d0e0f:0-49")
        #expect(first.headers["Content-Type"] == "application/json")
        let array = try #require(try JSONSerialization.jsonObject(with: Data(first.body)) as? [[String: Any]])
        #expect(array.count == 50)
        #expect(array[3]["id"] as? String == "000102030405060708090a0b0c0d0e0f-3")
        #expect((array[3]["data"] as? [String: Int])?["n"] == 3)
    }

    @Test func dispatchCallsBackAfterEveryRequest() async throws {
        let consumer = MemoryConsumer(records: 120)
        let results = Mutex<[String]>([])
        let report = try await worker(consumer, ScriptedUploader()).dispatch { result in
            results.withLock { $0.append(result.name) }
        }
        #expect(results.withLock { $0 } == ["good", "good", "good", "noData"])
        #expect(report.batches == 3)
    }

    @Test func sendOnLaunch() async throws {
        let consumer = MemoryConsumer(records: 7)
        let worker = try worker(consumer, ScriptedUploader(), SyncConfiguration())
        await worker.start()
        try await eventually("launch flush") { consumer.committed == 7 }
        await worker.stop()
    }

    @Test func stoppingCancelsTheWriteObservation() async throws {
        let consumer = MemoryConsumer(records: 3)
        for round in 1...3 {
            let worker = try worker(consumer, ScriptedUploader(), SyncConfiguration())
            await worker.start()
            #expect(consumer.observerCount == 1, "round \(round): one registration while running")
            await worker.stop()
            #expect(consumer.observerCount == 0, "round \(round): stop must cancel it")
        }
    }

    @Test func startAfterStopRegistersNothing() async throws {
        let consumer = MemoryConsumer(records: 3)
        let uploader = ScriptedUploader()
        let worker = try worker(consumer, uploader, SyncConfiguration())
        await worker.stop()
        await worker.start()
        #expect(consumer.observerCount == 0)
        #expect(uploader.sent.isEmpty)
    }

    @Test func countTriggerFollowsObservedWrites() async throws {
        var configuration = SyncConfiguration.manual
        configuration.flushCount = 10
        let consumer = MemoryConsumer()
        let uploader = ScriptedUploader()
        let worker = try worker(consumer, uploader, configuration)
        await worker.start()
        consumer.append(9)
        consumer.append(1)
        try await eventually("count flush") { consumer.committed == 10 }
        #expect(uploader.sent.count == 1)
        await worker.stop()
    }

    @Test func intervalTimerRunsOnTheInjectedClock() async throws {
        var configuration = SyncConfiguration()
        configuration.flushInterval = .seconds(10)
        let consumer = MemoryConsumer()
        let uploader = ScriptedUploader()
        let worker = try worker(consumer, uploader, configuration)
        await worker.start()
        consumer.append(3)
        try await eventually("timer armed") { clock.sleepers == 1 }
        clock.advance(by: .seconds(9))
        // A timer armed too early would fire asynchronously: give it the chance to show.
        try await Task.sleep(for: .milliseconds(100))
        #expect(uploader.sent.isEmpty)
        #expect(consumer.committed == 0)
        clock.advance(by: .seconds(1))
        try await eventually("interval flush") { consumer.committed == 3 }
        await worker.setFlushInterval(.seconds(60))
        #expect(await worker.flushInterval == .seconds(60))
        await worker.stop()
    }

    @Test func pauseStopsTheTimerAndResumeRestartsIt() async throws {
        var configuration = SyncConfiguration()
        configuration.flushInterval = .seconds(10)
        let consumer = MemoryConsumer()
        let worker = try worker(consumer, ScriptedUploader(), configuration)
        await worker.start()
        try await eventually("timer armed") { clock.sleepers == 1 }
        await worker.pause()
        try await eventually("timer cancelled") { clock.sleepers == 0 }
        consumer.append(2)
        clock.advance(by: .seconds(100))
        #expect(consumer.committed == 0)
        await worker.resume()
        try await eventually("timer re-armed") { clock.sleepers == 1 }
        clock.advance(by: .seconds(10))
        try await eventually("flush after resume") { consumer.committed == 2 }
        await worker.stop()
    }

    @Test func aHungServerTimesOutAndIsRetried() async throws {
        let consumer = MemoryConsumer(records: 10)
        let uploader = ScriptedUploader { _, index in
            if index == 0 { try await Task.sleep(for: .seconds(3600)) }  // hangs until cancelled
            return UploadResponse(status: 200)
        }
        let worker = try worker(consumer, uploader)
        let flush = Task { await worker.flush(retries: 1) }
        try await eventually("request timeout armed") { clock.sleepers == 1 }
        clock.advance(by: .seconds(30))
        let report = await flush.value
        #expect(report.failure == nil)
        #expect(uploader.sent.count == 2)
        #expect(consumer.committed == 10)
        #expect(await worker.stats.failures[.timeout] == 1)
    }

    @Test func transportErrorsAreRetriedAndNeverCommitted() async throws {
        struct Reset: Error {}
        let consumer = MemoryConsumer(records: 10)
        let uploader = ScriptedUploader { _, index in
            if index < 2 { throw Reset() }
            return UploadResponse(status: 200)
        }
        let worker = try worker(consumer, uploader)
        let failed = await worker.flush()
        #expect(failed.failure?.code == .network)
        #expect(consumer.commits.isEmpty)
        let retried = await worker.flush(retries: 1)  // backoff jitter 0: no wait
        #expect(retried.failure == nil)
        #expect(consumer.committed == 10)
        #expect(await worker.stats.retries == 2)
    }

    @Test func garbageAnswersAreRetriedAndNeverCommitted() async throws {
        let consumer = MemoryConsumer(records: 10)
        let uploader = ScriptedUploader { _, index in
            switch index {
            case 0: UploadResponse(status: 302, body: [0xFF, 0x00, 0xFE])
            case 1: UploadResponse(status: 0)
            default: UploadResponse(status: 200, body: Array("not json at all".utf8))
            }
        }
        let report = try await worker(consumer, uploader).flush(retries: 2)
        #expect(report.failure == nil)
        #expect(consumer.commits == [10])
        #expect(uploader.sent.count == 3)
    }

    @Test func retryAfterIsWaitedOutOnTheClock() async throws {
        let consumer = MemoryConsumer(records: 10)
        let uploader = ScriptedUploader { _, index in
            index == 0 ? UploadResponse(status: 429, headers: ["Retry-After": "20"]) : UploadResponse(status: 200)
        }
        let worker = try worker(consumer, uploader)
        let flush = Task { await worker.flush(retries: 1) }
        try await eventually("backoff armed") { clock.nextDeadline?.offset == .seconds(20) }
        clock.advance(by: .seconds(19))
        #expect(uploader.sent.count == 1)
        clock.advance(by: .seconds(1))
        #expect(await flush.value.failure == nil)
        #expect(uploader.sent.count == 2)
    }

    /// Issue 50: records the log cannot read are recorded before the offset passes them,
    /// counted, and reported to the app through the per-batch results.
    @Test func damagedRangesAreRecordedBeforeTheCommitAndReported() async throws {
        let consumer = MemoryConsumer(records: 30)
        consumer.damage(10..<20)
        let deadLetters = MemoryDeadLetters()
        deadLetters.committed = { consumer.committed }
        let results = Mutex<[BatchResult]>([])
        let worker = try worker(consumer, ScriptedUploader(), deadLetters: deadLetters)
        let report = await worker.dispatch { result in results.withLock { $0.append(result) } }
        #expect(report.failure == nil)
        #expect(report.records == 20)
        #expect(report.damaged.records == 10 && report.damaged.ranges.map(\.seqs) == [10..<20])
        #expect(deadLetters.damaged.map(\.range.seqs) == [10..<20])
        #expect(deadLetters.damaged.first?.committed.map { $0 < 20 } == true, "recorded before the commit passed it")
        #expect(consumer.committed == 30)
        #expect(await worker.stats.damaged.records == 10)
        #expect(results.withLock { $0 }.contains { if case .damaged(let ranges) = $0 { ranges.map(\.seqs) == [10..<20] } else { false } })
    }

    @Test func onDamageStopCommitsUpToTheRangeAndStops() async throws {
        let consumer = MemoryConsumer(records: 30)
        consumer.damage(10..<20)
        var configuration = SyncConfiguration.manual
        configuration.onDamage = .stop
        let deadLetters = MemoryDeadLetters()
        let worker = try worker(consumer, ScriptedUploader(), configuration, deadLetters: deadLetters)
        let report = await worker.flush()
        #expect(report.failure?.code == .damaged)
        #expect(report.failure?.message.contains("10..<20") == true)
        #expect(consumer.committed == 10)
        #expect(deadLetters.damaged.isEmpty)
        #expect(await worker.stats.fatalError?.code == .damaged)
    }

    @Test func poisonRecordsGoToTheDeadLetterSink() async throws {
        let consumer = MemoryConsumer(records: 10)
        let deadLetters = MemoryDeadLetters()
        let uploader = ScriptedUploader { request, _ in
            let body = String(decoding: request.body, as: UTF8.self)
            return body.contains(#"{"n":5}"#) ? UploadResponse(status: 400, body: Array("field n is bad".utf8)) : UploadResponse(status: 200)
        }
        let worker = try worker(consumer, uploader, deadLetters: deadLetters)
        let report = await worker.flush()
        #expect(report.failure == nil)
        #expect(report.deadLettered == 1)
        #expect(report.records == 9)
        #expect(deadLetters.records.map(\.seq) == [5])
        #expect(deadLetters.errors.first?.status == 400)
        #expect(deadLetters.errors.first?.serverMessage == "field n is bad")
        #expect(deadLetters.errors.first?.message.contains("field n is bad") == false)
        #expect(consumer.committed == 10)
        #expect(await worker.stats.deadLettered == 1)
    }

    @Test func commitFailureEndsTheFlushAndTheNextStartsFromDisk() async throws {
        let consumer = MemoryConsumer(records: 10)
        consumer.failCommits(1)
        let uploader = ScriptedUploader()
        let worker = try worker(consumer, uploader)
        let failed = await worker.flush()
        #expect(failed.failure?.code == .commitFailed)
        #expect(failed.failure?.cause is SpoolError)
        #expect(uploader.sent.count == 1)
        let next = await worker.flush()
        #expect(next.failure == nil)
        #expect(uploader.sent.count == 2)
        #expect(uploader.sent[1].headers["Spool-Batch"] == uploader.sent[0].headers["Spool-Batch"])
        #expect(consumer.committed == 10)
    }

    @Test func deadlineTooCloseStartsNoRequest() async throws {
        let consumer = MemoryConsumer(records: 10)
        let uploader = ScriptedUploader()
        let report = try await worker(consumer, uploader).flush(within: .milliseconds(500))  // < 1 s
        #expect(report.deadlineReached)
        #expect(uploader.sent.isEmpty)
    }

    @Test func stopAbandonsAHungUploadWithoutCommitting() async throws {
        let consumer = MemoryConsumer(records: 10)
        let uploader = ScriptedUploader { _, _ in
            try await Task.sleep(for: .seconds(3600))
            return UploadResponse(status: 200)
        }
        let worker = try worker(consumer, uploader)
        let flush = Task { await worker.flush() }
        try await eventually("upload started") { uploader.sent.count == 1 }
        await worker.stop()
        #expect(await flush.value.failure?.code == .stopped)
        #expect(consumer.commits.isEmpty)
        #expect(await worker.flush().failure?.code == .stopped)
    }

    @Test func invalidConfigurationNamesTheField() {
        var configuration = SyncConfiguration()
        configuration.maxBatchCount = 0
        #expect { try worker(MemoryConsumer(), ScriptedUploader(), configuration) } throws: { error in
            guard let error = error as? SyncError else { return false }
            return error.code == .invalidConfiguration && error.message.contains("maxBatchCount")
        }
    }
}
