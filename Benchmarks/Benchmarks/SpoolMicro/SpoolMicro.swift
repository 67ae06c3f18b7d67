// Micro benchmarks of Spool's hot paths, with package-benchmark: time, throughput and
// malloc counts per operation. Run:
//
//   swift package --package-path Benchmarks benchmark
//   swift package --package-path Benchmarks benchmark --filter "append.*"
import Benchmark
import Foundation
import Spool
import BenchScenarios
import SpoolSync

/// The events every micro benchmark appends (the same generator as `compare`).
let events: EventSet = {
    var generator = EventGenerator()
    return generator.events(20_000)
}()

/// Opens a new log in a fresh temporary directory, runs `body`, closes and removes it.
func withFreshLog<T>(_ name: String, configuration: Configuration = .init(), _ body: (EventLog) throws -> T) throws -> T {
    let directory = NSTemporaryDirectory() + "spool-micro-\(getpid())-\(name)"
    try? FileManager.default.removeItem(atPath: directory)
    let log = try EventLog.open(directory: directory, configuration: configuration)
    defer {
        try? log.close()
        try? FileManager.default.removeItem(atPath: directory)
    }
    return try body(log)
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .cpuTotal, .mallocCountTotal, .peakMemoryResident],
        warmupIterations: 1,
        maxDuration: .seconds(2),
        maxIterations: 10_000
    )

    // One `append` at each durability level. Buffered: 1,000 per iteration (it is ~100 ns).
    Benchmark("append buffered ×1000", configuration: .init(scalingFactor: .kilo)) { benchmark in
        try withFreshLog("buffered") { log in
            benchmark.startMeasurement()
            for index in benchmark.scaledIterations {
                blackHole(try log.append(events[cycling: index]))
            }
            benchmark.stopMeasurement()
        }
    }
    for durability in [Durability.written, .synced] {
        Benchmark("append \(durability) ×100") { benchmark in
            try withFreshLog("\(durability)") { log in
                benchmark.startMeasurement()
                for index in 0..<100 {
                    blackHole(try log.appendBlocking(events[cycling: index], durability: durability))
                }
                benchmark.stopMeasurement()
            }
        }
    }

    // Sealing one 64 KiB block: gather a block's worth of records, then wait until the writer
    // has compressed, checksummed and written it.
    let blockEvents = 64 * 1024 / Int(events.meanSize) + 1
    Benchmark("seal+write one 64 KiB block") { benchmark in
        try withFreshLog("seal") { log in
            var cursor = 0
            benchmark.startMeasurement()
            defer { benchmark.stopMeasurement() }
            for _ in benchmark.scaledIterations {
                var seq: UInt64 = 0
                for _ in 0..<blockEvents {
                    seq = try log.append(events[cycling: cursor])
                    cursor += 1
                }
                try log.waitUntilBlocking(before: seq + 1, is: .written)
            }
        }
    }

    // Reading back: a consumer reads (decompresses, checks, decodes) a 20,000-record log in
    // 500-record batches, with fast commits to move on. One iteration is the whole log.
    Benchmark("read 20,000 records in 500-record batches") { benchmark in
        try withFreshLog("read") { log in
            for index in 0..<events.count { try log.append(events[cycling: index]) }
            try log.syncBlocking()
            let consumer = try log.consumer(named: "micro")
            benchmark.startMeasurement()
            while true {
                let batch = try consumer.read(maxCount: 500, maxBytes: 1 << 20)
                if batch.isEmpty { break }
                try consumer.commit(batch, mode: .fast)
                blackHole(batch)
            }
            benchmark.stopMeasurement()
        }
    }

    // Committing an offset: durable (pwrite + fdatasync of the offset file) and fast (pwrite).
    for mode in CommitMode.allCases {
        Benchmark("commit offset (\(mode)) ×100") { benchmark in
            try withFreshLog("commit-\(mode)") { log in
                for index in 0..<events.count { try log.append(events[cycling: index]) }
                try log.syncBlocking()
                let consumer = try log.consumer(named: "micro")
                var seq = consumer.committed
                benchmark.startMeasurement()
                for _ in 0..<100 {
                    try consumer.commit(upTo: seq + 1, mode: mode)
                    seq += 1
                }
                benchmark.stopMeasurement()
            }
        }
    }

    // Building request bodies from 50 records: SpoolSync's encoder (each layout) and the
    // plain JSON array the SQLite baseline builds.
    let records = (0..<50).map { Record(seq: UInt64($0), timestamp: 1_700_000_000_000 + Int64($0), payload: events.events[$0]) }
    for encoding in HTTPSink.Encoding.allCases {
        let encoder = BatchEncoder(logID: LogID.random(), encoding: encoding)
        Benchmark("encode 50 records (\(encoding))", configuration: .init(scalingFactor: .kilo)) { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(encoder.encode(records, maxBytes: 1 << 20))
            }
        }
    }
    Benchmark("encode 50 events (plain JSON array)", configuration: .init(scalingFactor: .kilo)) { benchmark in
        for index in benchmark.scaledIterations {
            let start = (index * 50) % (events.count - 50)
            blackHole(jsonArrayBody(events.events[start..<start + 50]))
        }
    }
}
