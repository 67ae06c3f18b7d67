import Spool
import Testing
import SpoolSync

/// `SyncWorker(source:…)` keeps working for the one release the deprecated `SyncSource` stays.
/// This file goes with it.
@Suite struct DeprecatedSyncSourceTests {
    @available(*, deprecated, message: "calls the deprecated SyncWorker(source:…)")
    @Test func sourceInitializerStillDrainsCommitsAndWatches() async throws {
        let consumer = MemoryConsumer(records: 120)
        let uploader = ScriptedUploader()
        let worker = try SyncWorker(
            source: LegacySource(consumer: consumer), uploader: uploader, configuration: .manual, deadLetters: nil,
            clock: ManualClock(), random: { 0 }, wallClock: { 784_111_777 })
        let report = await worker.flush()
        #expect(report.records == 120)
        #expect(uploader.firstSeqs == [0, 50, 100])
        #expect(consumer.commits == [50, 100, 120])
        await worker.start()
        #expect(consumer.observerCount == 1)
        await worker.stop()
        #expect(consumer.observerCount == 0)
    }
}

/// A deprecated ``SyncSource`` over an in-memory consumer, as a caller's own source was.
@available(*, deprecated, message: "a SyncSource, to test the deprecated path")
private struct LegacySource: SyncSource {
    let consumer: MemoryConsumer

    var logID: LogID { consumer.logID }
    var consumerName: String { consumer.name }
    var committedOffset: UInt64 { consumer.committed }
    var pendingRecords: UInt64 { consumer.pendingRecords }

    func nextBatch(maxCount: Int, maxBytes: Int) async throws -> SourceBatch {
        let batch = try await consumer.read(maxCount: maxCount, maxBytes: maxBytes)
        return SourceBatch(records: batch.records, end: batch.endSeq)
    }

    func commit(upTo end: UInt64) async throws {
        try await consumer.commit(upTo: end, mode: .durable)
    }

    func observeWrites(_ handler: @escaping @Sendable (UInt64) -> Void) -> WriteObservation {
        (try? consumer.watchWrites(handler)) ?? WriteObservation {}
    }
}
