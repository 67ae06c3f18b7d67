import Foundation
import Spool
import SpoolCollector
import Testing
@testable import SpoolSync

/// `SyncGroup` (issue #29): one worker drains every writer log of a shared directory to the
/// reference collector on 127.0.0.1, each log through its own consumer and window.
@Suite(.serialized) struct SyncGroupTests {
    struct Rig {
        let group: String
        let collector: Collector
        let url: URL

        static func make(latency: Duration = .zero) async throws -> Rig {
            let group = FileManager.default.temporaryDirectory.appendingPathComponent("spool-group-\(UUID().uuidString)").path
            var configuration = CollectorConfiguration()
            configuration.faults.latency = latency
            configuration.seed = 42
            let collector = Collector(configuration: configuration)
            let port = try await collector.start()
            return Rig(group: group, collector: collector, url: URL(string: "http://127.0.0.1:\(port)/batch")!)
        }

        /// Opens writer `name` of the group and appends `count` records (written before it returns).
        func writer(_ name: String, appending count: Int, configuration: Configuration = .init()) async throws -> EventLog {
            let log = try EventLog.open(group: group, writer: name, configuration: configuration)
            try await append(count, to: log)
            return log
        }

        func append(_ count: Int, to log: EventLog) async throws {
            let start = log.nextSeq
            var last: UInt64 = 0
            for i in 0..<count { last = try log.append(Array(#"{"writer":"\#(log.id)","n":\#(start + UInt64(i))}"#.utf8)) }
            if count > 0 { try await log.waitUntil(before: last + 1, is: .written) }
        }

        /// The seqs the collector received from `log`, sorted.
        func received(from log: EventLog) -> [UInt64] {
            collector.records().filter { $0.logID == log.id.description }.map(\.seq).sorted()
        }

        func tearDown() async {
            await collector.stop()
            try? FileManager.default.removeItem(atPath: group)
        }
    }

    func committed(_ log: EventLog) throws -> UInt64? {
        let snapshot = try LogSnapshot(directory: log.directory)
        defer { snapshot.close() }
        return snapshot.consumerOffsets["sync"]
    }

    @Test func itDrainsEveryWriterLogUnderItsOwnIdAndCommitsEachOffsetSeparately() async throws {
        let rig = try await Rig.make()
        let app = try await rig.writer("app", appending: 500)
        let widget = try await rig.writer("widget", appending: 200)
        let share = try await rig.writer("share", appending: 7)
        let group = try SyncGroup(directory: rig.group, url: rig.url, configuration: .fastForTests)
        let report = await group.flush(retries: EndToEndTests.retries)
        #expect(report.failure == nil)
        #expect(report.records == 707)
        #expect(Set(report.writers.keys) == ["app", "widget", "share"])
        #expect(await group.writers == ["app", "share", "widget"])
        for (log, count) in [(app, 500), (widget, 200), (share, 7)] {
            #expect(rig.received(from: log) == Array(0..<UInt64(count)), "every record of \(log.directory), once, under its own log id")
            #expect(try committed(log) == UInt64(count))
        }
        #expect(rig.collector.records().count == 707)
        await group.stop()
        for log in [app, widget, share] { try log.close() }
        await rig.tearDown()
    }

    @Test func aWriterLogThatAppearsWhileItRunsIsPickedUp() async throws {
        let rig = try await Rig.make()
        let app = try await rig.writer("app", appending: 20)
        var configuration = SyncConfiguration.fastForTests
        configuration.flushInterval = .milliseconds(20)
        configuration.flushCount = 1
        let fixed = configuration
        let group = try SyncGroup(directory: rig.group, consumer: "sync", configuration: fixed,
                                  discoveryInterval: .milliseconds(50)) { consumer in
            HTTPSink(uploader: platformUploader(url: rig.url), logID: consumer.logID, configuration: fixed)
        }
        let first = await group.start()
        #expect(first.added == ["app"])
        try await eventually("the app's records") { rig.received(from: app).count == 20 }
        let late = try await rig.writer("notification-service", appending: 30)
        try await eventually("the new writer's records") { rig.received(from: late).count == 30 }
        #expect(await group.writers == ["app", "notification-service"])
        try await rig.append(5, to: app)
        try await eventually("the app's later records") { rig.received(from: app).count == 25 }
        await group.stop()
        // A stopped group has released every consumer: another committer can take them.
        let again = try DetachedConsumer(directory: late.directory, name: "sync")
        #expect(again.committed == 30)
        again.close()
        try app.close()
        try late.close()
        await rig.tearDown()
    }

    @Test func aChattyWriterDoesNotHoldTheAppsRecordsBack() async throws {
        // 50 ms per answer and one request in flight per log: the widget's 20,000 records take
        // 400 answers (20 s) to drain; the app's 100 must not wait behind them.
        let rig = try await Rig.make(latency: .milliseconds(50))
        let widget = try await rig.writer("widget", appending: 20_000)
        let app = try await rig.writer("app", appending: 100)
        var configuration = SyncConfiguration.fastForTests
        configuration.concurrency = .fixed(1)
        configuration.maxBatchCount = 50
        configuration.flushInterval = .milliseconds(20)
        let group = try SyncGroup(directory: rig.group, url: rig.url, configuration: configuration)
        await group.start()
        try await eventually("the app's records") { rig.received(from: app).count == 100 }
        let widgetSoFar = rig.received(from: widget).count
        #expect(widgetSoFar < 10_000, "the app's records waited for \(widgetSoFar) of the widget's")
        await group.stop()
        try widget.close()
        try app.close()
        await rig.tearDown()
    }

    @Test func retentionInAWriterLogKeepsWhatTheGroupHasNotCommitted() async throws {
        let rig = try await Rig.make()
        var small = Configuration()
        small.segmentSize = 64 * 1024
        small.blockSize = 4 * 1024
        // Incompressible-ish payloads, so 64 KiB segments roll often.
        func noise(_ i: Int) -> [UInt8] {
            var state = UInt64(i) &* 0x9E37_79B9_7F4A_7C15 | 1
            return Array((0..<40).map { _ -> String in
                state ^= state << 13; state ^= state >> 7; state ^= state << 17
                return String(state % 36, radix: 36)
            }.joined().utf8)
        }
        let log = try EventLog.open(group: rig.group, writer: "app", configuration: small)
        func append(_ range: Range<Int>) async throws {
            var last: UInt64 = 0
            for i in range { last = try log.append(Array(#"{"n":\#(i),"x":"\#(String(decoding: noise(i), as: UTF8.self))"}"#.utf8)) }
            try await log.waitUntil(before: last + 1, is: .synced)
        }
        try await append(0..<3_000)
        let group = try SyncGroup(directory: rig.group, url: rig.url, configuration: .fastForTests)
        let first = await group.flush(retries: EndToEndTests.retries)
        #expect(first.records == 3_000)
        // Many segments roll past the group's offset; the writer's retention may delete only
        // what the group committed.
        try await append(3_000..<12_000)
        try await eventually("retention after the group's commit") { log.firstSeq > 0 }
        #expect(log.firstSeq <= 3_000, "retention deleted records the group had not committed (first stored \(log.firstSeq))")
        let second = await group.flush(retries: EndToEndTests.retries)
        #expect(second.records == 9_000)
        #expect(rig.received(from: log) == Array(0..<12_000))
        await group.stop()
        try log.close()
        await rig.tearDown()
    }

    @Test func aBadGroupConfigurationIsRefused() throws {
        var configuration = SyncConfiguration()
        configuration.maxBatchCount = 0
        #expect(throws: SyncError.self) {
            _ = try SyncGroup(directory: "/tmp", url: URL(string: "http://127.0.0.1:1/")!, configuration: configuration)
        }
        #expect(throws: SyncError.self) {
            _ = try SyncGroup(directory: "/tmp", discoveryInterval: .zero) { _ in fatalError("never made") }
        }
    }
}
