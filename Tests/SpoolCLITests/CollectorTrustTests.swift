import Foundation
import Spool
import Testing

/// Who may write what through a real `spool collector` (issue #53): a token file being written
/// opens nothing, a record is never dropped as a duplicate of different bytes, and the
/// collector says when its files are unsafe.
@Suite struct CollectorTrustTests {
    /// How a changed token file is re-read.
    enum Reread: String, CaseIterable, Sendable {
        case watcher, hangup
    }

    /// A file rewritten in place, in two pieces (a whole line, then the first byte of the
    /// next): while its last line has no newline, no prefix of it nor any one-character token
    /// is accepted, and the tokens in force stay.
    @Test(arguments: Reread.allCases)
    func aTokenFileBeingWrittenOpensNothing(_ reread: Reread) throws {
        let dir = temporaryDirectory("tokenFileBeingWritten\(reread)")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let tokens = dir + "/tokens"
        let (first, second, third) = ("first-token-0123456789", "second-token-XYZ-0001", "third-token-ABC-0002")
        try writePrivately(tokens, first + "\n")
        let collector = try CollectorChild(["--log", dir + "/collector", "--auth-token-file", tokens], stderrPath: dir + "/collector.err")
        defer { collector.kill() }
        let device = LogID.random()
        func status(_ token: String) -> Int { post(collector, log: device, token: token).status }
        #expect(status(first) == 200)

        let handle = try #require(FileHandle(forWritingAtPath: tokens))
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: Data((second + "\nt").utf8))
        if reread == .hangup { kill(collector.pid, SIGHUP) }
        let signal = reread == .hangup ? "SIGHUP:" : "no newline"
        var reread = false
        for _ in 0..<200 where !reread {
            reread = collector.stderr.contains(signal) || status(second) == 200
            if !reread { usleep(50_000) }
        }
        #expect(reread, "the collector never re-read the file: \(collector.stderr)")

        let oneCharacter = (UInt8(ascii: "a")...UInt8(ascii: "z")).map { String(UnicodeScalar($0)) }
            + (UInt8(ascii: "A")...UInt8(ascii: "Z")).map { String(UnicodeScalar($0)) }
            + (0...9).map(String.init) + ["-", ".", "_", "~", "+", "/"]
        let prefixes = (1..<third.count).map { String(third.prefix($0)) }
        let accepted = (oneCharacter + prefixes).filter { status($0) != 401 }
        #expect(accepted.isEmpty, "accepted while the file was being written: \(accepted)")
        #expect(status(first) == 200, "the tokens in force stay while the file is being written")

        try handle.write(contentsOf: Data((third.dropFirst() + "\n").utf8))
        try handle.close()
        var switched = false
        for _ in 0..<200 where !switched {
            switched = status(third) == 200
            if !switched { usleep(50_000) }
        }
        #expect(switched, "the finished file was never put in force: \(collector.stderr)")
        #expect(status(second) == 200 && status(first) == 401 && status("t") == 401)
        collector.stop()
        let errors = collector.stderr
        #expect(![first, second, third].contains { errors.contains($0) }, "a token was printed: \(errors)")
    }

    @Test func aTokenShorterThan16BytesIsRefusedNamingItsLine() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let tokens = dir + "/tokens"
        try writePrivately(tokens, "# fleet\nlong-enough-token-01\nshort-token-015\n")
        #expect {
            try CollectorChild(["--out", dir + "/out.ndjson", "--auth-token-file", tokens], stderrPath: dir + "/collector.err")
        } throws: { error in
            "\(error)".contains("line 3") && "\(error)".contains("16 bytes") && !"\(error)".contains("short-token")
        }
    }

    /// The only way to revoke every token: a file whose only line is `!revoke-all`. An empty
    /// file (one being rewritten, most often) keeps the tokens in force.
    @Test func aRevokeAllMarkerRefusesEveryTokenAndAnEmptyFileKeepsThem() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let tokens = dir + "/tokens", token = "fleet-token-0123456789"
        try writePrivately(tokens, token + "\n")
        let collector = try CollectorChild(["--out", dir + "/out.ndjson", "--auth-token-file", tokens], stderrPath: dir + "/collector.err")
        defer { collector.kill() }
        let device = LogID.random()
        func reload(_ contents: String, expecting line: String) {
            try? writePrivately(tokens, contents)
            let before = collector.stderr.components(separatedBy: line).count
            kill(collector.pid, SIGHUP)
            var done = false
            for _ in 0..<200 where !done {
                done = collector.stderr.components(separatedBy: line).count > before
                if !done { usleep(20_000) }
            }
            #expect(done, "\(collector.stderr)")
        }
        reload("", expecting: "the tokens in force stay")
        #expect(post(collector, log: device, token: token).status == 200, "an empty file keeps the tokens in force")
        reload("# every device is refused from now on\n!revoke-all\n", expecting: "SIGHUP: 0 tokens in force")
        #expect(post(collector, log: device, token: token).status == 401)
        #expect(collector.stderr.contains("every token is revoked"), "\(collector.stderr)")
        reload("!revoke-all\n" + token + "\n", expecting: "could not be re-read")
        #expect(collector.stderr.contains("line 1"), "\(collector.stderr)")
        #expect(post(collector, log: device, token: token).status == 401, "a bad file keeps the revocation in force")
    }

    /// A token whose line names log ids writes records of those only: a batch of another log,
    /// or one that carries another log's records as origins, is answered 403 naming the rule.
    @Test func aTokenBoundToLogIDsWritesOnlyThose() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (device, collectorLog, tokens) = (dir + "/device", dir + "/collector", dir + "/tokens")
        let id = try makeDeviceLog(device, device: 1, count: 10)
        let other = LogID.random()
        let (bound, forwarder) = ("bound-token-000001", "forwarder-token-01")
        try writePrivately(tokens, "\(bound) \(id)\n\(forwarder)\n")
        let collector = try CollectorChild(["--log", collectorLog, "--auth-token-file", tokens], stderrPath: dir + "/collector.err")
        defer { collector.kill() }
        let sync = try SpoolBinary.run(["sync", device, "--url", collector.url, "--once", "--create", "--retries", "0",
                                        "--header", "Authorization: Bearer \(bound)"])
        #expect(sync.status == 0, "\(sync.stderr)")
        let refused = post(collector, log: other, token: bound)
        #expect(refused.status == 403 && refused.body.contains("\(other)") && refused.body.contains("token file"), "\(refused)")
        let envelope = #"[{"id":"\#(id)-10","seq":10,"time":1,"origin_id":"\#(other)-0","origin_seq":0,"data":{"n":0}}]"#
        let smuggled = httpPost(collector.url, body: Data(envelope.utf8), headers: [
            "Content-Type": "application/json", "Spool-Batch": "\(id):10-10", "Authorization": "Bearer \(bound)",
        ])
        #expect(smuggled.status == 403, "\(smuggled)")
        #expect(post(collector, log: other, token: forwarder).status == 200, "a token without log ids writes any")
        collector.stop()
        let origins = try dumpOrigins(collectorLog)
        #expect(origins.filter { $0.log == id }.count == 10 && origins.filter { $0.log == other }.count == 1)
    }

    @Test func aTokenFileOthersCanReadIsWarnedAboutAndRefusedWithStrictPermissions() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let tokens = dir + "/tokens"
        for mode in [0o644, 0o666, 0o604, 0o640] as [mode_t] {
            try writePrivately(tokens, "fleet-token-0123456789\n")
            chmod(tokens, mode)
            let octal = "0" + String(mode, radix: 8)
            let collector = try CollectorChild(["--out", dir + "/out.ndjson", "--auth-token-file", tokens], stderrPath: dir + "/\(octal).err")
            #expect(collector.stderr.contains("warning") && collector.stderr.contains("mode \(octal)"), "\(octal): \(collector.stderr)")
            // Every re-read says it again.
            kill(collector.pid, SIGHUP)
            var warnings = 0
            for _ in 0..<200 where warnings < 2 {
                warnings = collector.stderr.components(separatedBy: "mode \(octal)").count - 1
                if warnings < 2 { usleep(20_000) }
            }
            #expect(warnings >= 2, "\(octal): \(collector.stderr)")
            collector.stop()
            #expect {
                try CollectorChild(["--out", dir + "/out.ndjson", "--auth-token-file", tokens, "--strict-permissions"],
                                   stderrPath: dir + "/\(octal)-strict.err")
            } throws: { error in
                "\(error)".contains("mode \(octal)") && "\(error)".contains("chmod 600")
            }
        }
        chmod(tokens, 0o600)
        let strict = try CollectorChild(["--out", dir + "/out.ndjson", "--auth-token-file", tokens, "--strict-permissions"],
                                        stderrPath: dir + "/strict.err")
        strict.stop()
        #expect(!strict.stderr.contains("warning"), "\(strict.stderr)")
    }

    @Test func aWorldWritableLogDirectoryIsRefusedAndAGroupWritableOneWarned() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = dir + "/collector"
        try FileManager.default.createDirectory(atPath: log, withIntermediateDirectories: false)
        for mode in [0o777, 0o1777, 0o702] as [mode_t] {
            chmod(log, mode)
            let octal = "0" + String(mode, radix: 8)
            #expect {
                try CollectorChild(["--log", log], stderrPath: dir + "/\(octal).err")
            } throws: { error in
                "\(error)".contains("world-writable") && "\(error)".contains("mode \(octal)") && "\(error)".contains("chmod o-w")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: log + "/" + OriginRecord.markerFileName), "a refused directory was written to")
        chmod(log, 0o770)
        let shared = try CollectorChild(["--log", log], stderrPath: dir + "/0770.err")
        shared.stop()
        #expect(shared.stderr.contains("warning") && shared.stderr.contains("group-writable") && shared.stderr.contains("mode 0770"), "\(shared.stderr)")
        chmod(log, 0o700)
        let own = try CollectorChild(["--log", log], stderrPath: dir + "/0700.err")
        own.stop()
        #expect(!own.stderr.contains("warning"), "\(own.stderr)")
    }

    /// Anyone with a token sends another device's ids first, with made-up data: the device's
    /// real records are still stored (as conflicts, with ids of their own), and counted.
    @Test func recordsSentFirstUnderAnotherDevicesIDsDoNotHideItsOwn() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let device = dir + "/device", collectorLog = dir + "/collector"
        let id = try makeDeviceLog(device, device: 1, count: 10)
        let collector = try CollectorChild(["--log", collectorLog], stderrPath: dir + "/collector.err")
        defer { collector.kill() }
        let forged = post(collector, log: id, seqs: 0..<10, data: { #"{"forged":\#($0)}"# })
        #expect(forged.status == 200 && forged.body.contains(#""accepted":10"#), "\(forged)")

        let sync = try SpoolBinary.run(["sync", device, "--url", collector.url, "--once", "--create", "--retries", "0"])
        #expect(sync.status == 0, "\(sync.stderr)")
        // The same forged bytes again are duplicates; a third version of the ids is more conflicts.
        let repeated = post(collector, log: id, seqs: 0..<10, data: { #"{"forged":\#($0)}"# })
        #expect(repeated.body.contains(#""duplicates":10"#) && repeated.body.contains(#""conflicts":0"#), "\(repeated)")
        let third = post(collector, log: id, seqs: 0..<2, data: { #"{"third":\#($0)}"# })
        #expect(third.body == #"{"accepted":2,"duplicates":0,"conflicts":2}"#, "\(third)")
        collector.stop()

        let origins = try dumpOrigins(collectorLog)
        let real = origins.filter { String(decoding: $0.payload, as: UTF8.self).hasPrefix(#"{"device":1,"#) }
        #expect(real.map(\.seq).sorted() == Array(0..<10), "the device's records: \(real.count)")
        #expect(real.allSatisfy { $0.conflict && $0.log == id })
        #expect(origins.filter { !$0.conflict }.count == 10, "the first copy of each id keeps its plain id")
        #expect(Set(origins.map(\.id)).count == origins.count, "two stored records share an id")
        var counted = ""
        for _ in 0..<100 where !counted.contains("conflicts") {
            counted = collector.stdout
            if !counted.contains("conflicts") { usleep(20_000) }
        }
        #expect(counted.contains("conflicts 12"), "\(counted)")
        #expect(collector.stderr.contains("conflict") && !collector.stderr.contains("forged"), "\(collector.stderr)")
    }

    /// A collector restarted on its log learns what the log holds: a repeat of a record stored
    /// before the restart is still a duplicate, and other bytes under its id still a conflict
    /// (before, both were stored again under the plain id, and a destination keyed on it kept
    /// only the first).
    @Test func aRestartedCollectorStillComparesWithWhatItsLogHolds() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let collectorLog = dir + "/collector"
        let id = LogID.random()
        let first = try CollectorChild(["--log", collectorLog], stderrPath: dir + "/first.err")
        let sent = post(first, log: id, seqs: 0..<10)
        #expect(sent.body == #"{"accepted":10,"duplicates":0,"conflicts":0}"#, "\(sent)")
        first.stop()

        let second = try CollectorChild(["--log", collectorLog], stderrPath: dir + "/second.err")
        defer { second.kill() }
        let repeated = post(second, log: id, seqs: 0..<10)
        #expect(repeated.body == #"{"accepted":0,"duplicates":10,"conflicts":0}"#, "\(repeated)")
        let other = post(second, log: id, seqs: 8..<12, data: { #"{"other":\#($0)}"# })
        #expect(other.body == #"{"accepted":4,"duplicates":0,"conflicts":2}"#, "\(other)")
        second.stop()
        let origins = try dumpOrigins(collectorLog)
        #expect(origins.count == 14 && origins.filter(\.conflict).map(\.seq) == [8, 9], "\(origins.map(\.id))")
    }

    /// A log directory copied (an app restored from a backup onto a second phone): both copies
    /// go on with the same seqs and different events; every record of both is stored, the
    /// records they share once. The copy's writer starts an epoch (FORMAT.md §13), so its new
    /// records go out under an id of their own: no conflict at all.
    @Test func twoCopiesOfOneLogDirectoryEachHaveEveryRecordStoredOnce() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (first, second, collectorLog) = (dir + "/first", dir + "/second", dir + "/collector")
        let id = try makeDeviceLog(first, device: 1, count: 20)
        try FileManager.default.copyItem(atPath: first, toPath: second)
        for (path, device) in [(first, 2), (second, 3)] {
            let lines = (0..<10).map { #"{"device":\#(device),"n":\#($0)}"# }.joined(separator: "\n") + "\n"
            let appended = try SpoolBinary.run(["append", path, "--durability", "synced"], input: Data(lines.utf8))
            #expect(appended.status == 0, "\(appended.stderr)")
        }
        let collector = try CollectorChild(["--log", collectorLog], stderrPath: dir + "/collector.err")
        defer { collector.kill() }
        for path in [first, second] {
            let sync = try SpoolBinary.run(["sync", path, "--url", collector.url, "--once", "--create", "--retries", "0"])
            #expect(sync.status == 0, "\(sync.stderr)")
        }
        collector.stop()
        let payloads = try dumpOrigins(collectorLog).map { String(decoding: $0.payload, as: UTF8.self) }
        let expected = (0..<20).map { #"{"device":1,"n":\#($0),"# } + (2...3).flatMap { device in (0..<10).map { #"{"device":\#(device),"n":\#($0)}"# } }
        let missing = expected.filter { wanted in !payloads.contains { $0.hasPrefix(wanted) && ($0 == wanted || wanted.hasSuffix(",")) } }
        #expect(missing.isEmpty, "missing: \(missing)")
        #expect(payloads.count == 40, "stored \(payloads.count) records")
        let origins = try dumpOrigins(collectorLog)
        #expect(origins.allSatisfy { !$0.conflict }, "a copy's records taken for conflicts")
        let copied = origins.filter { String(decoding: $0.payload, as: UTF8.self).hasPrefix(#"{"device":3,"#) }
        let epoch = try #require(copied.first?.log)
        #expect(epoch != id && copied.allSatisfy { $0.log == epoch } && copied.map(\.seq) == Array(20..<30), "\(copied.map(\.id))")
        #expect(origins.filter { $0.log == id }.count == 30, "the original's records and the shared ones keep the log's id")
        // `spool stat` shows the copy's epoch, and none for the original.
        let stat = try SpoolBinary.run(["stat", second])
        #expect(stat.stdout.contains("epoch       \(epoch) from seq 20"), "\(stat.stdout)")
        #expect(try !SpoolBinary.run(["stat", first]).stdout.contains("epoch"))
    }

    // MARK: Helpers

    /// Writes `contents` to `path` in place (mode 0600 when created).
    private func writePrivately(_ path: String, _ contents: String) throws {
        if !FileManager.default.fileExists(atPath: path) {
            _ = FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: Data(contents.utf8))
        try handle.close()
    }

    /// POSTs one batch of JSON envelopes of `log` (`data(seq)` each) to `collector`.
    private func post(_ collector: CollectorChild, log: LogID, seqs: Range<UInt64> = 0..<1, token: String? = nil,
                      data: (UInt64) -> String = { #"{"n":\#($0)}"# }) -> (status: Int, body: String) {
        let envelopes = seqs.map { #"{"id":"\#(log)-\#($0)","seq":\#($0),"time":1767225600000,"data":\#(data($0))}"# }
        var headers = ["Content-Type": "application/json", "Spool-Batch": "\(log):\(seqs.lowerBound)-\(seqs.upperBound - 1)"]
        if let token { headers["Authorization"] = "Bearer " + token }
        return httpPost(collector.url, body: Data(("[" + envelopes.joined(separator: ",") + "]").utf8), headers: headers)
    }
}
