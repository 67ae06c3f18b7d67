import Foundation
import Spool
import Testing
#if canImport(Glibc)
import Glibc
#endif

// Linux only: it uses `environ`, `posix_spawn_file_actions_t()` and `ru_maxrss` in KiB as glibc has them.
#if os(Linux)
/// A block costs a reader its raw bytes in memory, never its record count: a block of millions
/// of empty records (allowed: 2 bytes each) must not become millions of records held at once.
/// Measured as the peak resident size of a real `spool verify` process, against the same
/// command on a log of one record, so the figure does not depend on the machine.
@Suite struct ReaderMemoryTests {
    /// Runs `spool arguments…` (output discarded) and returns its wait status and peak RSS in bytes.
    func peakResidentSize(_ arguments: [String]) throws -> (status: Int32, bytes: Int) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv: [UnsafeMutablePointer<CChar>?] = ([SpoolBinary.path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, SpoolBinary.path, &actions, nil, argv, environ)
        guard spawned == 0 else { throw POSIXError(POSIXErrorCode(rawValue: spawned) ?? .EIO) }
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
        return (status, usage.ru_maxrss * 1024)  // Linux reports KiB
    }

    @Test func aBlockOfMillionsOfEmptyRecordsIsReadInItsOwnBytes() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var configuration = Configuration()
        configuration.blockSize = 16 << 20
        configuration.maxPendingBytes = 256 << 20
        configuration.linger = .seconds(60)
        let count = 4 << 20
        try withEventLog(directory: dir + "/many", configuration: configuration) { log in
            for _ in 0..<count { try log.append([UInt8]()) }
        }
        try withEventLog(directory: dir + "/one") { _ = try $0.append([UInt8]()) }
        let snapshot = try LogSnapshot(directory: dir + "/many")
        let summary = try snapshot.summary()
        snapshot.close()
        #expect(summary.segments.map(\.blocks) == [1], "the records must share one block")
        #expect(summary.records == UInt64(count))

        let one = try peakResidentSize(["verify", dir + "/one"])
        let many = try peakResidentSize(["verify", dir + "/many"])
        #expect(one.status == 0 && many.status == 0)
        // Held at once, the records alone would take 24 bytes each (96 MiB); the block's raw
        // bytes are 8 MiB.
        #expect(many.bytes - one.bytes < 48 << 20, "\(many.bytes >> 20) MiB vs \(one.bytes >> 20) MiB for one record")
    }
}
#endif
