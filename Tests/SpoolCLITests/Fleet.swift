import Foundation
import SpoolServers
import Spool
import Testing

/// Issue #28's fleet on 127.0.0.1, the part every fleet test shares: nginx (Debian's package,
/// its own configuration in a temporary directory) in front of three `spool collector --log`
/// processes with bearer tokens, each forwarded by a `spool sync --sidecar` of its own to one
/// destination (the only thing a fleet test chooses). Four devices keep appending and sync
/// through nginx with adaptive concurrency while collectors and forwarders are SIGKILLed and
/// restarted at random; a device with a wrong token is refused (401) and stores nothing.
///
/// nginx (SpoolBench's ``Nginx``) is installed by `scripts/setup`; when it is missing or cannot
/// start, the test fails with the reason (it never skips).
enum Fleet {
    /// What the devices stored, for the destination's check.
    struct Devices {
        /// Every device record's id, `<device log id>-<seq>`.
        var expected: Set<String>
        /// The id of the log of the device with a wrong token.
        var intruder: LogID
        /// How many times a collector was SIGKILLed.
        var kills: Int
    }

    /// Runs the fleet, its forwarders sending to `destination` (`--url …`, `--postgres …`,
    /// `--pubsub-topic …`) with `environment`; once the devices have stopped appending and the
    /// intruder was refused, calls `delivered` while every process still runs, which waits for
    /// the destination to hold every record and checks it. Then checks that no collector
    /// stored the intruder's records and that no forwarder ended by itself (a forwarder that
    /// exits, as on a fatal error, forwards nothing more: a fleet of them would stall).
    ///
    /// It blocks its thread throughout, as the other process tests do: an async fleet gave its
    /// cooperative thread up at each sleep, and in the full CLI run (two threads, held for
    /// minutes by tests that wait for their children) resumed so late that it took 340 s.
    ///
    /// - Returns: the number of records the collectors' logs hold (repeats included).
    @discardableResult
    static func run(_ name: String = #function, destination: [String], environment: [String: String] = [:],
                    delivered: (Devices) throws -> Void) throws -> Int {
        let dir = temporaryDirectory(name)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let tokens = dir + "/tokens"
        try "fleet-token-000001\n".write(toFile: tokens, atomically: true, encoding: .utf8)

        let ports = try (0..<3).map { _ in try freePort() }
        // --max-concurrent: room for every request the devices may have in flight (4 × adaptive
        // ≤ 16). nginx counts a collector's overload 503 as a failure (`http_503`), and with every
        // collector out for `fail_timeout` it answers 502 "no live upstreams", without
        // Retry-After, from which the devices back off exponentially (at the default of 8, for
        // tens of seconds).
        func collector(_ index: Int) throws -> CollectorChild {
            try CollectorChild(["--log", dir + "/c\(index)", "--auth-token-file", tokens, "--max-concurrent", "64"], port: ports[index],
                               stderrPath: dir + "/c\(index).err")
        }
        func forwarder(_ index: Int) throws -> SidecarTests.Child {
            try SidecarTests.Child(["sync", dir + "/c\(index)", "--sidecar", "--create", "--interval", "0.2", "--count", "1",
                                    "--batch-count", "200"] + destination,
                                   environment: environment, stderrPath: dir + "/f\(index).err")
        }
        var collectors = try (0..<3).map(collector)
        var forwarders = try (0..<3).map(forwarder)
        defer {
            collectors.forEach { $0.kill() }
            forwarders.forEach { $0.kill() }
        }
        let nginx = try Nginx(directory: dir, upstreams: ports)
        defer { nginx.stop() }
        let entry = nginx.url

        // Four devices, each fed by a `spool append` that keeps appending, with its sidecar sync
        // through nginx (adaptive concurrency, the default).
        let devices = (0..<4).map { dir + "/device\($0)" }
        var ids: [LogID] = []
        for (index, device) in devices.enumerated() { ids.append(try makeDeviceLog(device, device: index, count: 200)) }
        let feeders = try devices.enumerated().map { try Feeder(directory: $0.element, device: $0.offset) }
        defer { feeders.forEach { $0.finish() } }
        let syncs = try devices.map { device in
            try SidecarTests.Child(["sync", device, "--sidecar", "--create", "--url", entry, "--header", "Authorization: Bearer fleet-token-000001",
                                    "--interval", "0.2", "--count", "1", "--batch-count", "20"])
        }
        defer { syncs.forEach { $0.kill() } }

        // Chaos while the devices append: collectors (and half the time their forwarders) die
        // and come back on the same port; now and then a forwarder dies alone.
        var random = SplitMix64(seed: 2828)
        var kills = 0
        let chaosEnd = Date().addingTimeInterval(10)
        while Date() < chaosEnd {
            let victim = Int(random.next() % 3)
            usleep(UInt32(200_000 + random.next() % 500_000))
            collectors[victim].kill()
            if random.next() % 2 == 0 {
                forwarders[victim].kill()
                forwarders[victim] = try forwarder(victim)
            }
            usleep(UInt32(100_000 + random.next() % 400_000))
            collectors[victim] = try collector(victim)
            kills += 1
            if random.next() % 4 == 0 {
                let alone = Int(random.next() % 3)
                forwarders[alone].kill()
                forwarders[alone] = try forwarder(alone)
            }
        }
        // The devices stop appending; every record they stored must arrive.
        feeders.forEach { $0.finish() }
        var counts: [Int] = []
        for device in devices {
            let dump = try SpoolBinary.run(["dump", device])
            counts.append(dump.stdout.split(separator: "\n").count)
        }

        // A device with a wrong token: 401 through nginx, nothing of it stored anywhere.
        let intruder = dir + "/intruder"
        let intruderID = try makeDeviceLog(intruder, device: 99, count: 50)
        // Retried (401 is, by default: a token is fixed by a person, and nothing is dead-lettered
        // meanwhile), so that a 502 from nginx while a killed collector restarts is not the last
        // word; 4 retries back off 1.5 s at most (10 took a minute).
        let refused = try SpoolBinary.run(["sync", intruder, "--url", entry, "--once", "--create", "--retries", "4",
                                           "--header", "Authorization: Bearer stolen-token"])
        #expect(refused.status == 1 && refused.stderr.contains("401"), "\(refused.stderr)")

        let expected = Set(zip(ids, counts).flatMap { id, count in (0..<UInt64(count)).map { id.eventID(seq: $0) } })
        try delivered(Devices(expected: expected, intruder: intruderID, kills: kills))

        for (index, forwarder) in forwarders.enumerated() {
            let errors = (try? String(contentsOfFile: dir + "/f\(index).err", encoding: .utf8)) ?? ""
            #expect(forwarder.process.isRunning, "forwarder \(index) ended by itself: \(errors.suffix(1500))")
        }
        var stored = 0
        for index in 0..<3 {
            let origins = try dumpOrigins(dir + "/c\(index)")
            #expect(!origins.contains { $0.log == intruderID })
            stored += origins.count
        }
        return stored
    }

    /// Polls `received` (what the destination holds now) until it covers `expected` or
    /// `seconds` have passed; returns the last answer.
    static func waitFor<T>(_ expected: Set<String>, seconds: Double = 90, ids: (T) -> Set<String>, _ received: () throws -> T) throws -> T {
        let deadline = Date().addingTimeInterval(seconds)
        var last = try received()
        while !ids(last).isSuperset(of: expected), Date() < deadline {
            usleep(250_000)
            last = try received()
        }
        return last
    }

    /// A device: `spool append` fed 10 records every 20 ms by a thread of its own until
    /// ``finish()``, which closes its input so it stores everything and exits.
    final class Feeder: @unchecked Sendable {
        let process = Process()
        private let input = Pipe()
        private let stopped = Mutexed(false)
        private let done = DispatchSemaphore(value: 0)

        init(directory: String, device: Int) throws {
            process.executableURL = URL(fileURLWithPath: SpoolBinary.path)
            process.arguments = ["append", directory, "--durability", "written"]
            process.standardInput = input
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            let writer = input.fileHandleForWriting
            Thread.detachNewThread { [self] in
                var n = 0
                while !stopped.get() {
                    let lines = (n..<n + 10).map { #"{"device":\#(device),"n":\#($0),"event":"tap"}"# }.joined(separator: "\n") + "\n"
                    n += 10
                    if (try? writer.write(contentsOf: Data(lines.utf8))) == nil { break }
                    usleep(20_000)
                }
                try? writer.close()
                done.signal()
            }
        }

        /// Stops feeding and waits for `spool append` to store what it was given and exit.
        func finish() {
            guard !stopped.get() else { return }
            stopped.set(true)
            done.wait()
            process.waitUntilExit()
        }
    }
}
