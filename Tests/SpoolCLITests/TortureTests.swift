import Foundation
import Testing

/// The bounded torture run CI makes on every change: `spool crash-test` with sync children
/// killed mid-upload against a real collector on 127.0.0.1, and with corruption (torn tails,
/// flipped bits, zeroed ranges, cut headers, garbage and foreign files) read back by real
/// `spool dump` and `spool verify` children. A seed is printed with every failure.
@Suite struct TortureTests {
    static let rounds = ProcessInfo.processInfo.environment["SPOOL_TORTURE_ROUNDS"]

    @Test(arguments: ["written", "synced"])
    func syncKilledMidUploadNeverCommitsPastTheCollector(durability: String) throws {
        try crashTest(["--with-sync", "--durability", durability], rounds: Self.rounds ?? "8")
    }

    /// Every sync child with 8 requests in flight, killed mid-round: the committed offset still
    /// never passes a record the collector has not acknowledged. (The test above picks 1, 4 or
    /// adaptive at random per child.)
    @Test func syncWithEightRequestsInFlightKilledMidUpload() throws {
        try crashTest(["--with-sync", "--sync-concurrency", "8", "--durability", "written"], rounds: Self.rounds ?? "6")
    }

    /// A sidecar `spool sync --sidecar` beside each appending child, each killed at its own
    /// moment, with 64 KiB segments so the appender's retention deletes what the sidecar
    /// committed: nothing acknowledged is lost, nothing is deleted before the collector has it.
    @Test func aSidecarSyncBesideTheAppenderKilledIndependently() throws {
        try crashTest(["--with-sync", "--sidecar", "--durability", "written"], rounds: Self.rounds ?? "8")
    }

    @Test func corruptionIsReportedAsItsRangeAndEverythingElseReads() throws {
        try crashTest(["--corrupt", "--durability", "written"], rounds: Self.rounds ?? "16")
    }

    @Test func syncAndCorruptionTogetherAtSynced() throws {
        try crashTest(["--with-sync", "--corrupt", "--durability", "synced"], rounds: Self.rounds ?? "6")
    }

    func crashTest(_ arguments: [String], rounds: String) throws {
        let seed = UInt64(Date().timeIntervalSince1970)
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let result = try SpoolBinary.run(["crash-test", "--rounds", rounds, "--seed", "\(seed)", "--dir", dir] + arguments)
        #expect(result.status == 0, "seed \(seed): \(result.stdout.suffix(3000)) \(result.stderr.suffix(500))")
        #expect(result.stdout.contains("\(rounds) passed, 0 failed"), "seed \(seed): \(result.stdout.suffix(3000))")
    }
}
