import Foundation
import Spool
import Testing

/// `spool collector --log` as a real process (issue #28): what it acknowledged survives
/// SIGKILL, tokens are required and re-read on SIGHUP, `/healthz` follows the log's health, and
/// a collector's log forwarded to another collector keeps every device record's id.
@Suite struct CollectorLogProcessTests {
    @Test func aCollectorKilledRightAfterItsAnswersKeepsEveryRecordItAcknowledged() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let device = dir + "/device", collectorLog = dir + "/collector"
        let count = 4000
        let deviceID = try makeDeviceLog(device, device: 0, count: count)
        var random = SplitMix64(seed: 28)
        var killedMidway = 0
        var offsets: [UInt64] = []
        for round in 0..<5 {
            // 20 ms before each answer, 5 records a request, one at a time: about 250 records a
            // second, so each kill, 0.7 to 2.7 s after the start, lands in the middle.
            let collector = try CollectorChild(["--log", collectorLog, "--latency-ms", "20"], stderrPath: dir + "/collector.err")
            let sync = try SidecarTests.Child(["sync", device, "--url", collector.url, "--create", "--interval", "0.1", "--count", "1",
                                               "--batch-count", "5", "--concurrency", "1"])
            usleep(UInt32(700_000 + random.next() % 2_000_000))
            collector.kill()
            sync.kill()
            // Whatever the device committed was answered 2xx: it must be in the collector's log.
            let committed = try SidecarTests().committedOffset(device, "sync") ?? 0
            let stored = Set(try dumpOrigins(collectorLog).filter { $0.log == deviceID }.map(\.seq))
            let missing = (0..<committed).filter { !stored.contains($0) }
            #expect(missing.isEmpty, "round \(round): \(missing.count) acknowledged records missing, first \(missing.first.map(String.init) ?? "")")
            offsets.append(committed)
            if committed > 0 && committed < UInt64(count) { killedMidway += 1 }
            if committed >= UInt64(count) { break }
        }
        #expect(killedMidway > 0, "no round killed the collector in the middle of the upload: offsets \(offsets)")
        // The rest, to the end: every device record is in the collector's log, with its time.
        let collector = try CollectorChild(["--log", collectorLog], stderrPath: dir + "/collector.err")
        let drained = try SpoolBinary.run(["sync", device, "--url", collector.url, "--once", "--create", "--retries", "10"])
        collector.stop()
        #expect(drained.status == 0, "\(drained.stderr)")
        let origins = try dumpOrigins(collectorLog)
        #expect(Set(origins.map(\.seq)) == Set(0..<UInt64(count)))
        #expect(origins.allSatisfy { $0.log == deviceID && $0.time != nil })
        #expect(origins.first.map { String(decoding: $0.payload, as: UTF8.self).hasPrefix(#"{"device":0,"n":"#) } == true)
        #expect(OriginRecord.storesOrigins(at: collectorLog))
    }

    @Test func postsWithoutAValidTokenAre401AndStoreNothingAndSIGHUPReReadsTheTokens() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let device = dir + "/device", collectorLog = dir + "/collector", tokens = dir + "/tokens"
        try makeDeviceLog(device, device: 1, count: 120)
        try "# devices of fleet A\nfirst-token-000001\n".write(toFile: tokens, atomically: true, encoding: .utf8)
        let collector = try CollectorChild(["--log", collectorLog, "--auth-token-file", tokens], stderrPath: dir + "/collector.err")
        defer { collector.kill() }
        let sync = ["sync", device, "--url", collector.url, "--once", "--create", "--retries", "0"]

        let missing = try SpoolBinary.run(sync)
        #expect(missing.status == 1 && missing.stderr.contains("401"), "\(missing.stderr)")
        let wrong = try SpoolBinary.run(sync + ["--header", "Authorization: Bearer second-token-00001"])
        #expect(wrong.status == 1 && wrong.stderr.contains("401"), "\(wrong.stderr)")
        #expect(try dumpOrigins(collectorLog).isEmpty, "a refused request stored something")

        // The file now holds another token; SIGHUP puts it in force at once.
        try "second-token-00001\n".write(toFile: tokens, atomically: true, encoding: .utf8)
        kill(collector.pid, SIGHUP)
        var reloaded = false
        for _ in 0..<100 where !reloaded {
            reloaded = collector.stderr.contains("SIGHUP: 1 tokens in force")
            if !reloaded { usleep(50_000) }
        }
        #expect(reloaded, "\(collector.stderr)")
        let old = try SpoolBinary.run(sync + ["--header", "Authorization: Bearer first-token-000001"])
        #expect(old.status == 1 && old.stderr.contains("401"), "\(old.stderr)")
        let accepted = try SpoolBinary.run(sync + ["--header", "Authorization: Bearer second-token-00001"])
        #expect(accepted.status == 0, "\(accepted.stderr)")
        collector.stop()
        #expect(try dumpOrigins(collectorLog).count == 120)
        let errors = collector.stderr
        #expect(!errors.contains("first-token-000001") && !errors.contains("second-token-00001"), "a token was printed: \(errors)")
    }

    @Test func anUnauthenticatedCollectorOnAnotherAddressThanLoopbackWarns() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let open = try CollectorChild(["--host", "0.0.0.0", "--out", dir + "/out.ndjson"], stderrPath: dir + "/open.err")
        open.stop()
        #expect(open.stderr.contains("warning: listening on 0.0.0.0 without --auth-token-file"), "\(open.stderr)")
        let local = try CollectorChild(["--out", dir + "/out.ndjson"], stderrPath: dir + "/local.err")
        local.stop()
        #expect(!local.stderr.contains("warning"), "\(local.stderr)")
    }

    /// A real file-size limit (`prlimit` on the running collector, SIGXFSZ ignored) stands for
    /// a full disk: the batch is answered 503, `/healthz` turns 503, and both come back when
    /// the limit is lifted.
    @Test func healthzIs200WhileTheLogCanBeWrittenAnd503WhenItCannot() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let device = dir + "/device", collectorLog = dir + "/collector"
        try makeDeviceLog(device, device: 2, count: 300)
        let collector = try CollectorChild(["--log", collectorLog], stderrPath: dir + "/collector.err")
        defer { collector.kill() }
        let health = "http://127.0.0.1:\(collector.port)/healthz"
        #expect(httpGet(health).status == 200)
        let sync = ["sync", device, "--url", collector.url, "--once", "--create", "--batch-count", "100", "--concurrency", "1"]
        #expect(try SpoolBinary.run(sync + ["--retries", "0"]).status == 0)
        try makeDeviceLog(device, device: 2, count: 300)  // 300 more

        let limit = Process()
        limit.executableURL = URL(fileURLWithPath: "/usr/bin/prlimit")
        limit.arguments = ["--pid", "\(collector.pid)", "--fsize=1:unlimited"]
        try limit.run()
        limit.waitUntilExit()
        try #require(limit.terminationStatus == 0, "prlimit failed")
        let refused = try SpoolBinary.run(sync + ["--retries", "0"])
        #expect(refused.status == 1 && refused.stderr.contains("503"), "\(refused.stderr)")
        let down = httpGet(health)
        #expect(down.status == 503 && down.body.contains("diskFull"), "\(down)")

        let lift = Process()
        lift.executableURL = URL(fileURLWithPath: "/usr/bin/prlimit")
        lift.arguments = ["--pid", "\(collector.pid)", "--fsize=unlimited:unlimited"]
        try lift.run()
        lift.waitUntilExit()
        var up = false
        for _ in 0..<100 where !up {
            up = httpGet(health).status == 200
            if !up { usleep(100_000) }
        }
        #expect(up, "healthz stayed 503 after the limit was lifted")
        let resumed = try SpoolBinary.run(sync + ["--retries", "5"])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        collector.stop()
        #expect(Set(try dumpOrigins(collectorLog).map(\.seq)) == Set(0..<600))
    }

    /// device → collector A (`--log`) → `spool sync --sidecar` of A's log → collector B
    /// (`--out`): B holds every device record under its device id, once. A restarted learns
    /// what its log holds, so a device that sends its records again is answered with
    /// duplicates and A stores none of them twice.
    @Test func aCollectorLogForwardedToAnotherCollectorKeepsTheDeviceIDs() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let devices = [dir + "/device0", dir + "/device1"], collectorLog = dir + "/a", out = dir + "/b.ndjson"
        let ids = try devices.enumerated().map { try makeDeviceLog($0.element, device: $0.offset, count: 700) }
        var a = try CollectorChild(["--log", collectorLog], stderrPath: dir + "/a.err")
        for device in devices {
            #expect(try SpoolBinary.run(["sync", device, "--url", a.url, "--once", "--create"]).status == 0)
        }
        // A restarted still knows what it received: a second consumer of device 0 sends it again.
        a.stop()
        a = try CollectorChild(["--log", collectorLog], stderrPath: dir + "/a.err")
        #expect(try SpoolBinary.run(["sync", devices[0], "--url", a.url, "--once", "--create", "--consumer", "again"]).status == 0)
        #expect(try dumpOrigins(collectorLog).count == 1400)

        let b = try CollectorChild(["--out", out], stderrPath: dir + "/b.err")
        let forward = try SpoolBinary.run(["sync", collectorLog, "--sidecar", "--url", b.url, "--once", "--create", "--encoding", "ndjson"])
        #expect(forward.status == 0, "\(forward.stderr)")
        b.stop()
        a.stop()
        let lines = try collectedLines(out)
        let expected = Set(ids.flatMap { id in (0..<700).map { id.eventID(seq: UInt64($0)) } })
        #expect(Set(lines.map(\.id)) == expected)
        #expect(lines.count == expected.count, "a record reached B twice")
        for (id, object) in lines.prefix(50) {
            let seq = try #require((object["seq"] as? NSNumber)?.uint64Value)
            #expect(id.hasSuffix("-\(seq)") && object["time"] != nil)
            let data = try #require(object["data"] as? [String: Any])
            #expect((data["n"] as? Int).map(UInt64.init) == seq)
        }
        // A raw encoding cannot carry the origin: refused before anything is sent.
        let raw = try SpoolBinary.run(["sync", collectorLog, "--sidecar", "--url", b.url, "--once", "--encoding", "raw"])
        #expect(raw.status != 0 && raw.stderr.contains("raw"), "\(raw.stderr)")
    }
}
