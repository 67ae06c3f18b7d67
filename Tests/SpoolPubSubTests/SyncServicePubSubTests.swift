import Foundation
import Spool
import SpoolServers
import Testing

/// `spool sync --pubsub-topic` as a service meeting a refusal, as a real process (issue #33).
@Suite(.serialized) struct SyncServicePubSubTests {
    /// A topic the emulator does not know: the service (no `--once`) used to stay alive,
    /// silent, and exit 0 on SIGTERM. It prints the refusal, the status once, and exits 1.
    @Test func aMissingTopicEndsTheService() async throws {
        let emulator = try await PubSubEmulator.shared()
        let unique = UUID().uuidString.prefix(8).lowercased()
        let topic = "projects/spool-test/topics/missing-\(unique)"
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spool-pubsub-missing-\(unique)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try withEventLog(directory: directory) { log in
            for index in 0..<5 { _ = try log.appendBlocking(Array(#"{"n":\#(index)}"#.utf8), durability: .synced) }
        }
        let errorsPath = directory + ".err"
        _ = FileManager.default.createFile(atPath: errorsPath, contents: nil)
        defer { try? FileManager.default.removeItem(atPath: errorsPath) }
        let process = try SyncCommandPubSubTests.sync([directory, "--pubsub-topic", topic, "--create"], emulator: emulator,
                                                      standardError: try FileHandle(forWritingTo: URL(fileURLWithPath: errorsPath)))
        let ended = await process.endsByItself(within: .seconds(120))
        let errors = (try? String(contentsOfFile: errorsPath, encoding: .utf8)) ?? ""
        #expect(ended, "the service ended by itself: \(errors)")
        #expect(process.terminationStatus == 1)
        #expect(errors.contains("destinationRefused: Pub/Sub does not know the topic (\(topic)) (HTTP 404)"), "\(errors)")
        #expect(errors.components(separatedBy: "HTTP 404").count == 2, "the status once: \(errors)")
    }
}
