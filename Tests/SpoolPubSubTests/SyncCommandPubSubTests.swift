import Foundation
import Spool
import SpoolServers
import Testing

/// `spool sync --pubsub-topic` as a real process, SIGKILLed mid-publish and run again.
@Suite(.serialized) struct SyncCommandPubSubTests {
    /// `.build/<config>/spool`, beside the test bundle.
    static var binary: String {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: directory.appendingPathComponent("spool").path), directory.path != "/" {
            directory.deleteLastPathComponent()
        }
        return directory.appendingPathComponent("spool").path
    }

    static func sync(_ arguments: [String], emulator: PubSubEmulator, standardError: FileHandle = .nullDevice) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["sync"] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(["PUBSUB_EMULATOR_HOST": "127.0.0.1:\(emulator.port)"]) { $1 }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = standardError
        try process.run()
        return process
    }

    /// Every record reaches the topic, through SIGKILLs of `spool sync --sidecar` while
    /// publishes are in flight: at least once (the killed runs' publishes are sent again),
    /// never lost, and the offset committed by the last run covers them all.
    @Test func killedSyncsLoseNothing() async throws {
        let emulator = try await PubSubEmulator.shared()
        let unique = UUID().uuidString.prefix(8).lowercased()
        let topic = "projects/spool-test/topics/kill-\(unique)"
        let subscription = "projects/spool-test/subscriptions/kill-\(unique)"
        try await emulator.createTopic(topic, subscription: subscription)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spool-pubsub-kill-\(unique)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let count = 20_000
        let logID: LogID
        do {
            let log = try EventLog.open(directory: directory)
            for index in 0..<count { _ = try log.append(Array(#"{"n":\#(index)}"#.utf8)) }
            try await log.sync()
            logID = log.id
            try log.close()
        }
        // As a sidecar (a detached consumer: it never opens the log for writing), with
        // adaptive concurrency, which the sink bounds only when an ordering key asks it to.
        let arguments = [directory, "--pubsub-topic", topic, "--consumer", "ps", "--create", "--once", "--sidecar",
                         "--batch-count", "250", "--concurrency", "adaptive", "--retries", "50"]
        var killed = 0
        for round in 0..<6 {
            let process = try Self.sync(arguments, emulator: emulator)
            try await Task.sleep(for: .milliseconds(300 + 150 * round))
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                killed += 1
            }
            process.waitUntilExit()
        }
        let last = try Self.sync(arguments, emulator: emulator)
        last.waitUntilExit()
        #expect(last.terminationStatus == 0)
        #expect(killed > 0, "at least one run was killed mid-publish")
        let ids = try await emulator.pullAll(subscription).compactMap { $0.attributes?["id"] }
        #expect(Set(ids) == Set((0..<UInt64(count)).map { logID.eventID(seq: $0) }))
        let reopened = try EventLog.open(directory: directory)
        defer { try? reopened.close() }
        #expect(try reopened.consumer(named: "ps").committed == UInt64(count))
    }
}
