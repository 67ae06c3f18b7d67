import Foundation
import Testing

/// Real crash tests: `spool crash-test` starts real `spool append --ack` processes, kills them
/// with SIGKILL at seeded random moments, and checks every acknowledged record after each round.
@Suite struct CrashTests {
    @Test(arguments: ["written", "synced"])
    func everyAcknowledgedRecordSurvivesSIGKILL(durability: String) throws {
        let seed = UInt64(Date().timeIntervalSince1970)
        let rounds = ProcessInfo.processInfo.environment["SPOOL_CRASH_ROUNDS"] ?? "25"
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let result = try SpoolBinary.run(["crash-test", "--rounds", rounds, "--seed", "\(seed)", "--durability", durability, "--dir", dir])
        #expect(result.status == 0, "seed \(seed): \(result.stdout.suffix(2000)) \(result.stderr.suffix(500))")
        #expect(result.stdout.contains("\(rounds) passed, 0 failed"), "seed \(seed): \(result.stdout.suffix(2000))")
    }
}
