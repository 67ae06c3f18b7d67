import CZstd
import Foundation
import Testing
@testable import Spool

/// Cold recompression (`Configuration.coldCompression`, FORMAT.md §2.1): a sealed segment is
/// rewritten once in larger blocks at a higher level, every record reading the same before and
/// after, readers inside it undisturbed, the cap kept, and any failure or crash leaving one
/// valid copy.
@Suite struct RecompressionTests {
    /// 4 KiB blocks at level 1 in 64 KiB segments, written at once; sealed segments rewritten
    /// at level 9 into 64 KiB blocks (the whole segment is then one block).
    static func configuration(background: Bool = false) -> Configuration {
        var configuration = rollingConfiguration()
        configuration.coldCompression = ColdCompression(level: 9, blockSize: 64 * 1024, inBackground: background)
        return configuration
    }

    /// Event-like JSON: repeated keys, a few varying fields, a random id (as analytics events are).
    static func event(_ i: Int) -> [UInt8] {
        var generator = SeededGenerator(seed: UInt64(i) &* 2_654_435_761 &+ 17)
        let id = (0..<16).map { _ in String(generator.next() & 15, radix: 16) }.joined()
        let text = "{\"event\":\"\(["screen_view", "tap", "purchase", "scroll"][i % 4])\",\"id\":\"\(id)\",\"n\":\(i),"
            + "\"screen\":\"home-\(i % 7)\",\"device\":{\"os\":\"iOS 18.\(i % 3)\",\"model\":\"iPhone16,\(i % 2)\"},"
            + "\"props\":{\"value\":\(i % 1000),\"currency\":\"EUR\"}}"
        return Array(text.utf8)
    }

    static func append(_ log: EventLog, _ range: Range<Int>) throws {
        for i in range { try log.append(event(i)) }
        try log.syncBlocking()
    }

    /// The records of the whole log, failing on any notice.
    static func allRecords(_ log: EventLog) throws -> [Record] {
        let items = try log.readAll()
        #expect(notices(items).isEmpty, "\(notices(items))")
        return records(items)
    }

    /// Checks that `payloads` are exactly the events of `range`, naming the first that differs
    /// (never printing the payloads).
    static func expectEvents(_ payloads: [[UInt8]], _ range: Range<Int>, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(payloads.count == range.count, sourceLocation: sourceLocation)
        if let first = Array(zip(payloads, range)).firstIndex(where: { $0.0 != event($0.1) }) {
            Issue.record("record \(range.lowerBound + first) differs", sourceLocation: sourceLocation)
        }
    }

    static func header(of path: String) throws -> SegmentHeader {
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)).prefix(Format.segmentHeaderSize))
        return try bytes.withUnsafeBytes { try SegmentHeader.parse($0).get() }
    }

    @Test func everyRecordReadsTheSameAfterASealedSegmentIsRewritten() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var log = try EventLog.open(directory: dir.path, configuration: Self.configuration())
        try Self.append(log, 0..<12000)
        let before = try Self.allRecords(log)
        #expect(before.count == 12000)
        let segments = dir.segments()
        #expect(segments.count >= 4, "several sealed segments: \(segments)")
        let sizesBefore = try segments.map { try FileIO.size(of: dir.file($0)) }
        let diskBytesBefore = log.stats().diskBytes

        let report = try log.recompressSealedSegments()
        #expect(report.segmentsRewritten == segments.count - 1, "every sealed segment, never the active one")
        #expect(report.bytesAfter < report.bytesBefore * 9 / 10, "\(report)")
        let same = try Self.allRecords(log) == before
        #expect(same, "every record reads the same")
        #expect(try log.verify().isClean)
        let stats = log.stats()
        #expect(stats.segmentsRecompressed == UInt64(segments.count - 1))
        #expect(stats.bytesSavedByRecompression == UInt64(report.bytesBefore - report.bytesAfter))
        #expect(stats.diskBytes == diskBytesBefore - (report.bytesBefore - report.bytesAfter))
        for (index, name) in segments.enumerated() {
            let header = try Self.header(of: dir.file(name))
            #expect(header.isRecompressed == (index < segments.count - 1), "\(name)")
            #expect(try FileIO.size(of: dir.file(name)) <= sizesBefore[index])
        }
        // A second call finds nothing to do: the flag in each header says so.
        #expect(try log.recompressSealedSegments() == RecompressionReport())
        // Appends go on; the log reopens and reads the same; a new process rewrites nothing twice.
        try Self.append(log, 12000..<12100)
        try log.close()
        log = try EventLog.open(directory: dir.path, configuration: Self.configuration())
        defer { try? log.close() }
        let after = try Self.allRecords(log)
        #expect(after.count == 12100)
        #expect(Array(after.prefix(12000)) == before)
        Self.expectEvents(after.map(\.payload), 0..<12100)
        let again = try log.recompressSealedSegments()
        #expect(again.segmentsRewritten == dir.segments().count - segments.count, "only the segments sealed since")
    }

    /// The background thread rewrites what rolls seal, without being asked.
    @Test func theBackgroundThreadRewritesSealedSegments() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path, configuration: Self.configuration(background: true))
        defer { try? log.close() }
        try Self.append(log, 0..<10000)
        let sealed = UInt64(dir.segments().count - 1)
        #expect(sealed >= 2)
        #expect(eventually(seconds: 60) { log.stats().segmentsRecompressed >= sealed }, "\(log.stats())")
        // A call while the thread works waits for the thread's rewrite and leaves nothing undone.
        try Self.append(log, 10000..<20000)
        let nowSealed = UInt64(dir.segments().count - 1)
        try log.recompressSealedSegments()
        #expect(nowSealed > sealed && log.stats().segmentsRecompressed == nowSealed, "\(log.stats())")
        Self.expectEvents(try Self.allRecords(log).map(\.payload), 0..<20000)
        #expect(try log.verify().isClean)
    }

    /// A reader inside a segment when it is replaced goes on reading the file it opened, and a
    /// snapshot taken before (listing the old sizes) reads the new files whole.
    @Test func aReaderInsideTheSegmentKeepsReadingTheFileItOpened() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path, configuration: Self.configuration())
        defer { try? log.close() }
        try Self.append(log, 0..<12000)
        let snapshot = try LogSnapshot(directory: dir.path)
        defer { snapshot.close() }
        let reader = log.reader(from: 0)
        var read = [Record]()
        for _ in 0..<10 {
            guard case .record(let record)? = try reader.next() else { Issue.record("a record"); return }
            read.append(record)
        }
        let report = try log.recompressSealedSegments()
        #expect(report.segmentsRewritten > 0)
        while let item = try reader.next() {
            guard case .record(let record) = item else {
                if case .notice(let notice) = item { Issue.record("a notice after \(read.count) records: \(notice)") }
                return
            }
            read.append(record)
        }
        Self.expectEvents(read.map(\.payload), 0..<12000)
        let items = try snapshot.readAll()
        #expect(notices(items).isEmpty, "\(notices(items))")
        Self.expectEvents(records(items).map(\.payload), 0..<12000)
    }

    /// Damage is evidence: a segment with a damaged block is left byte for byte as it was (and
    /// reported as before), the others are rewritten.
    @Test func aDamagedSegmentIsLeftAsItIs() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path, configuration: Self.configuration())
        defer { try? log.close() }
        try Self.append(log, 0..<12000)
        let segments = dir.segments()
        let damaged = dir.file(segments[1])
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: damaged)))
        bytes[Format.segmentHeaderSize + Format.blockHeaderSize + 100] ^= 0xFF
        try Data(bytes).write(to: URL(fileURLWithPath: damaged))
        let corruptBefore = try log.verify().corrupt

        let report = try log.recompressSealedSegments()
        #expect(report.segmentsRewritten == segments.count - 2)
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: damaged))) == bytes)
        #expect(try log.verify().corrupt == corruptBefore)
        #expect(!corruptBefore.isEmpty)
    }

    /// With a trained dictionary and with encryption: the rewrite reads every block and writes
    /// it under the current key, without a dictionary.
    @Test(arguments: [false, true])
    func dictionariesAndEncryptionReadTheSame(encrypted: Bool) throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var configuration = codecConfiguration(dictionary: .provided(codecTestDictionary()), key: encrypted ? codecTestKey(3) : nil)
        configuration.coldCompression = ColdCompression(level: 9, blockSize: 64 * 1024, inBackground: false)
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        defer { try? log.close() }
        try Self.append(log, 0..<10000)
        let before = try Self.allRecords(log)
        let report = try log.recompressSealedSegments()
        #expect(report.segmentsRewritten >= 2)
        let same = try Self.allRecords(log) == before
        #expect(same, "every record reads the same")
        #expect(try log.verify().isClean)
        let sealed = dir.segments().dropLast()
        for name in sealed {
            let file = try [UInt8](Data(contentsOf: URL(fileURLWithPath: dir.file(name))))
            let headers = blockHeaders(file)
            #expect(!headers.isEmpty)
            #expect(headers.allSatisfy { $0.header.dictionaryID == 0 && $0.header.isEncrypted == encrypted }, "\(name)")
        }
    }

    /// A failed write, sync or rename of the new file leaves the old one, and no temporary file.
    @Test(arguments: [FaultInjection.Operation.write, .sync, .rename])
    func aFailureAtAnyStepLeavesTheOldFile(operation: FaultInjection.Operation) throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanupFaults() }
        let log = try EventLog.open(directory: dir.path, configuration: Self.configuration())
        defer { try? log.close() }
        try Self.append(log, 0..<10000)
        let segments = dir.segments()
        let first = dir.file(segments[0])
        let bytes = try Data(contentsOf: URL(fileURLWithPath: first))
        FaultInjection.arm(operation, under: first + Format.temporarySuffix, fault: .error(.ioError))
        if operation == .rename {
            FaultInjection.arm(.rename, under: first, fault: .error(.ioError))
        }
        #expect(throws: SpoolError.self) { try log.recompressSealedSegments() }
        FaultInjection.disarm(under: first + Format.temporarySuffix)
        FaultInjection.disarm(under: first)
        #expect(try Data(contentsOf: URL(fileURLWithPath: first)) == bytes)
        #expect(!FileManager.default.fileExists(atPath: first + Format.temporarySuffix))
        Self.expectEvents(try Self.allRecords(log).map(\.payload), 0..<10000)
        // It goes on once the fault is gone.
        #expect(try log.recompressSealedSegments().segmentsRewritten == segments.count - 1)
        Self.expectEvents(try Self.allRecords(log).map(\.payload), 0..<10000)
    }

    /// A process killed mid-rewrite leaves a temporary file: the next open removes it, and the
    /// log reads and verifies as before.
    @Test func aLeftoverTemporaryFileIsRemovedAtOpen() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var log = try EventLog.open(directory: dir.path, configuration: Self.configuration())
        try Self.append(log, 0..<10000)
        try log.close()
        let leftover = dir.file(dir.segments()[0]) + Format.temporarySuffix
        try Data(Array(repeating: 0xAB, count: 10_000)).write(to: URL(fileURLWithPath: leftover))
        log = try EventLog.open(directory: dir.path, configuration: Self.configuration())
        defer { try? log.close() }
        #expect(!FileManager.default.fileExists(atPath: leftover))
        Self.expectEvents(try Self.allRecords(log).map(\.payload), 0..<10000)
        #expect(try log.verify().isClean)
    }

    /// A power cut right after rewrites (the directory `fsync` done or not, unsynced pages
    /// kept at random): every record reads the same, whichever copy the cut left.
    @Test(arguments: 0..<6)
    func aPowerCutLeavesOneValidCopy(seed: Int) throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanupFaults() }
        FaultInjection.trackSyncs(under: dir.path, wholeFiles: true)
        var log = try EventLog.open(directory: dir.path, configuration: Self.configuration())
        try Self.append(log, 0..<10000)
        if seed % 2 == 1 {
            // The last rename lands, its directory fsync does not (it fails): the cut brings
            // back that segment's old file. Each rewrite syncs its file, then the directory.
            let sealed = dir.segments().count - 1
            FaultInjection.arm(.sync, under: dir.path + "/", after: 2 * sealed - 1, times: 1, fault: .error(.ioError))
        }
        let sealed = Array(dir.segments().dropLast())
        let report = try log.recompressSealedSegments()
        #expect(report.segmentsRewritten == sealed.count)
        FaultInjection.disarm(under: dir.path + "/")
        try log.append(Self.event(10000))  // written, never synced
        try cutPower(closing: log, in: dir, unsynced: .pagesKept, seed: UInt64(seed))
        // Which copy the cut left: every rewritten one whose rename a directory fsync made
        // durable, and the old file where the last fsync failed.
        let rewritten = try sealed.map { try Self.header(of: dir.file($0)).isRecompressed }
        #expect(rewritten.dropLast().allSatisfy { $0 })
        #expect(rewritten.last == (seed % 2 == 0), "the last segment's \(seed % 2 == 0 ? "new" : "old") file")
        log = try EventLog.open(directory: dir.path, configuration: Self.configuration())
        defer { try? log.close() }
        let items = try log.readAll()
        #expect(notices(items).isEmpty, "\(notices(items))")
        let payloads = records(items).map(\.payload)
        #expect(payloads.count >= 10000)
        Self.expectEvents(Array(payloads.prefix(10000)), 0..<10000)
        #expect(try log.verify().isClean)
    }

    /// Under `dropOldest` the same appends keep more events with cold recompression than
    /// without, and the segments stay under the cap (the rewrite's file counted).
    @Test func aCappedLogKeepsMoreEvents() throws {
        let cap: Int64 = 1024 * 1024  // 16 segments: the active one and drops by whole segments leave most of it to rewritten ones
        func kept(cold: Bool) throws -> (kept: UInt64, largest: Int64) {
            let dir = TemporaryDirectory("cap\(cold)")
            defer { dir.cleanup() }
            var configuration = Self.configuration()
            configuration.maxBytes = Int(cap)
            if !cold { configuration.coldCompression = nil }
            let log = try EventLog.open(directory: dir.path, configuration: configuration)
            defer { try? log.close() }
            var largest: Int64 = 0
            for batch in 0..<40 {
                try Self.append(log, batch * 2000..<(batch + 1) * 2000)
                if cold { try log.recompressSealedSegments() }
                largest = max(largest, log.stats().diskBytes)
            }
            let stats = log.stats()
            #expect(stats.droppedRecords > 0, "the cap was reached")
            Self.expectEvents(try Self.allRecords(log).map(\.payload), Int(stats.firstSeq)..<80_000)
            return (stats.nextSeq - stats.firstSeq, largest)
        }
        let plain = try kept(cold: false)
        let cold = try kept(cold: true)
        #expect(cold.largest <= cap && plain.largest <= cap)
        // These events save about 25% when rewritten (the demo's, 39%: Benchmarks/README).
        #expect(cold.kept > plain.kept * 23 / 20, "cold \(cold.kept) against plain \(plain.kept)")
    }

    /// Retention deletes what every consumer passed; the rewrite takes the rest, and the
    /// consumer reads on from its offset as before.
    @Test func retentionAndRewritesCompose() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path, configuration: Self.configuration())
        defer { try? log.close() }
        let consumer = try log.consumer(named: "c")
        try Self.append(log, 0..<12000)
        let segments = dir.segments()
        let passed = try #require(Format.baseSeq(ofSegmentNamed: segments[2]))
        try consumer.commit(upTo: passed, mode: .durable)
        let remaining = dir.segments()
        #expect(remaining.count == segments.count - 2, "retention deleted the two passed segments")
        let report = try log.recompressSealedSegments()
        #expect(report.segmentsRewritten == remaining.count - 1)
        Self.expectEvents(try Self.allRecords(log).map(\.payload), Int(passed)..<12000)
        let batch = try consumer.read(maxCount: 1000, maxBytes: 64 << 20)
        #expect(batch.records.count == 1000)
        let matches = batch.records.map(\.payload) == (Int(passed)..<Int(passed) + 1000).map(Self.event)
        #expect(matches, "the consumer reads on from its offset")
    }

    /// The state's side of a rewrite: only a listed sealed segment, one at a time; its bytes
    /// count for the cap until it ends; retention forgetting its segment, close and suspend
    /// stop it; a replacement takes the new size.
    @Test func theStateAllowsOneRewriteOfAListedSealedSegment() throws {
        let sealed = SegmentInfo(baseSeq: 0, size: 5000)
        var state = LogState(nextSeq: 200, segments: [sealed, SegmentInfo(baseSeq: 100, size: 3000), SegmentInfo(baseSeq: 200, size: 64)], blockSize: 1024, linger: 0)
        let active = state.beginRewrite(of: SegmentInfo(baseSeq: 200, size: 64))
        #expect(active == nil, "never the active segment")
        let resized = state.beginRewrite(of: SegmentInfo(baseSeq: 0, size: 4999))
        #expect(resized == nil, "only at the size listed")
        let begun = state.beginRewrite(of: sealed)
        #expect(begun?.segment == sealed && begun?.stop.isRaised == false)
        let second = state.beginRewrite(of: SegmentInfo(baseSeq: 100, size: 3000))
        #expect(second == nil, "one at a time")
        state.noteRewriteWritten(1200)
        #expect(state.table.rewriteReservation == 1200 && state.rewriteMayContinue)
        _ = state.forgetSegments([SegmentInfo(baseSeq: 100, size: 3000)])
        #expect(state.rewriteMayContinue, "another segment's deletion leaves it")
        _ = state.forgetSegments([sealed])
        #expect(!state.rewriteMayContinue && state.table.rewriteReservation == 0, "its own segment's deletion cancels it")
        #expect(begun?.stop.isRaised == true, "and stops its compression")
        let token = state.takeWriteToken(waitingForRetention: true)
        #expect(!token, "suspend() waits for it to end")
        state.finishRewrite(replacedBy: nil)
        #expect(state.table.rewrite == nil && state.counters.segmentsRecompressed == 0)

        var other = LogState(nextSeq: 200, segments: [sealed, SegmentInfo(baseSeq: 200, size: 64)], blockSize: 1024, linger: 0)
        let again = other.beginRewrite(of: sealed)
        #expect(again != nil)
        other.finishRewrite(replacedBy: 3100)
        #expect(other.table.segments.first?.size == 3100 && other.counters.segmentsRecompressed == 1)
        let closing = other.beginRewrite(of: SegmentInfo(baseSeq: 0, size: 3100))
        let closes = other.requestClose()
        #expect(closes)
        #expect(closing?.stop.isRaised == true && !other.rewriteMayContinue, "close() stops the rewrite in flight")
        other.finishRewrite(replacedBy: nil)
        let afterClose = other.beginRewrite(of: SegmentInfo(baseSeq: 0, size: 3100))
        #expect(afterClose == nil, "none once close is asked")
    }

    /// A rewrite's block is compressed in steps, so close() or the cap stops it within a step:
    /// the stepped frame is a frame like the one-call one (content size declared, the same
    /// bytes back), a raised flag stops it, and the context compresses whole frames again after.
    @Test func steppedCompressionMakesTheSameFrameAndStopsWhenAsked() throws {
        let raw = (0..<20_000).flatMap { Self.event($0) }
        #expect(raw.count > 8 * ZstdCompressor.interruptionStep)
        func compress(_ compressor: ZstdCompressor) throws -> [UInt8] {
            var out = [UInt8](repeating: 0, count: ZstdCompressor.bound(raw.count))
            let size = try raw.withUnsafeBytes { source in try out.withUnsafeMutableBytes { try compressor.compress(source, into: $0) } }
            return Array(out.prefix(size))
        }
        func decompresses(_ frame: [UInt8]) -> Bool {
            var back = [UInt8](repeating: 0, count: raw.count)
            let ok = frame.withUnsafeBytes { f in back.withUnsafeMutableBytes { ZstdDecompressor().decompress(f, into: $0) } }
            return ok && back == raw
        }
        let stepped = ZstdCompressor(level: 9)
        stepped.interruption = StopFlag()
        let frame = try compress(stepped)
        #expect(decompresses(frame))
        let declared = frame.withUnsafeBytes { ZSTD_getFrameContentSize($0.baseAddress, $0.count) }
        #expect(declared == UInt64(raw.count), "the content size is in the frame header, as a full block's must be")
        let whole = try compress(ZstdCompressor(level: 9))
        #expect(decompresses(whole) && frame.count <= whole.count + whole.count / 20, "about as small as one call's: \(frame.count) against \(whole.count)")

        let stop = StopFlag()
        stop.raise()
        stepped.interruption = stop
        #expect(throws: ZstdCompressor.Interrupted.self) { _ = try compress(stepped) }
        stepped.interruption = StopFlag()
        #expect(decompresses(try compress(stepped)), "the context makes whole frames again")
    }

    @Test func badSettingsAreRefusedNamingTheField() {
        var configuration = Configuration()
        configuration.coldCompression = ColdCompression(level: 0)
        #expect(throws: SpoolError.self) { try configuration.validate() }
        configuration.coldCompression = ColdCompression(blockSize: 1024)
        do {
            try configuration.validate()
            Issue.record("a 1 KiB cold block is refused")
        } catch {
            #expect("\(error)".contains("coldCompression.blockSize"))
        }
    }
}
