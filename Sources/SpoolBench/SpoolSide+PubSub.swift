import AsyncHTTPClient
import Foundation
import NIOCore
import Spool
import SpoolPubSub
import SpoolSync
#if canImport(SpoolServers)
import SpoolServers
#else
import BenchServers
#endif

extension SpoolSide {
    /// Stores `count` events (untimed) and times one flush of them into a new topic of the
    /// Pub/Sub emulator: publishes of 1,000 messages, `concurrency` in flight.
    func drainToPubSub(count: Int, directory: String, emulator: PubSubEmulator, concurrency: SyncConfiguration.Concurrency) async throws -> Run {
        let topic = try await Self.newTopic(emulator)
        return try await drain(batch: PubSubSink.maxMessagesPerRequest, batchBytes: PubSubSink.maxRequestBytes, count: count,
                               directory: directory, concurrency: concurrency, backoff: nil) { log, _ in
            try PubSubSink(topic: topic, endpoint: emulator.root, credentials: .unauthenticated, logID: log)
        }
    }

    /// The emulator's own ceiling: the same messages (the first `count` events, with the same
    /// attributes), encoded beforehand into publishes of 1,000, posted by `concurrency` tasks
    /// with AsyncHTTPClient, as fast as the emulator answers. Only the posting is timed.
    func plainPublish(count: Int, emulator: PubSubEmulator, concurrency: Int) async throws -> Run {
        let topic = try await Self.newTopic(emulator)
        let log = LogID.random()
        let url = emulator.root.absoluteString + "/v1/\(topic):publish"
        var bodies: [[UInt8]] = []
        var index = 0
        while index < count {
            let end = min(count, index + PubSubSink.maxMessagesPerRequest)
            var body = Array(#"{"messages":["#.utf8)
            for seq in index..<end {
                if seq > index { body.append(UInt8(ascii: ",")) }
                let data = Data(events.events[seq % events.events.count]).base64EncodedString()
                body += Array(#"{"data":"\#(data)","attributes":{"id":"\#(log.eventID(seq: UInt64(seq)))","seq":"\#(seq)","log":"\#(log)","time":"0"}}"#.utf8)
            }
            body += Array("]}".utf8)
            bodies.append(body)
            index = end
        }
        let publishes = bodies
        let start = monotonicNanos()
        try await withThrowingTaskGroup(of: Void.self) { group in
            // Task `lane` posts publishes lane, lane + concurrency, …: all in flight at once.
            for lane in 0..<concurrency {
                group.addTask {
                    for taken in stride(from: lane, to: publishes.count, by: concurrency) {
                        let answer = try await HTTP.request("POST", url, body: publishes[taken])
                        guard answer.status == 200 else { throw BenchError("the emulator answered \(answer.status) to a plain publish") }
                    }
                }
            }
            try await group.waitForAll()
        }
        return Run(count: count, nanos: monotonicNanos() - start)
    }

    private static func newTopic(_ emulator: PubSubEmulator) async throws -> String {
        let topic = "projects/spool-bench/topics/bench-\(UUID().uuidString.prefix(8).lowercased())"
        let made = try await emulator.request("PUT", "/v1/\(topic)", body: nil)
        guard made.status == 200 else { throw BenchError("creating \(topic) on the emulator answered \(made.status)") }
        return topic
    }
}
