import Foundation
import Logging
import Synchronization
import Testing
@testable import Spool

/// Sealing on several cores (`Configuration.sealingThreads`, `SealAhead`): blocks sealed by
/// lanes are byte for byte what one encoder makes, and they land in seq order whatever order
/// they finish in, across segment rolls, with a dictionary and encryption.
@Suite struct ParallelSealingTests {
    /// Blocks whose sealing takes very different times (an incompressible 60 KiB block first,
    /// then small compressible ones), so the lanes finish out of order.
    static func unevenBlocks(count: Int, firstSeq: UInt64) -> [PendingBlock] {
        var generator = SplitMix64(seed: 36)
        var seq = firstSeq
        return (0..<count).map { index in
            var block = PendingBlock()
            block.reset(firstSeq: seq)
            let records = index % 5 == 0 ? 60 : 1 + index % 7
            for record in 0..<records {
                let bytes: [UInt8] = index % 5 == 0
                    ? (0..<1000).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
                    : payload(Int(seq) + record)
                bytes.withUnsafeBytes { block.add($0, timestamp: 1_767_225_600_000 + Int64(record)) }
            }
            seq += UInt64(block.count)
            return block
        }
    }

    /// A manual schedule of `SealAhead`: lane A takes block 1 and is held mid-block (at a
    /// `FaultGate`) while lane B seals blocks 2 and 3, so they finish out of order. The writer,
    /// taking blocks in seq order, seals block 0 itself (still queued), waits for block 1 (the
    /// test sees it wait) until lane A lets go, then takes 2 and 3 as sealed: each byte for byte
    /// what one encoder makes for its segment. A block sealed for a segment that a roll then
    /// replaced is handed back to be sealed again.
    @Test func theWriterTakesBlocksInSeqOrderWhicheverLaneFinishedFirst() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let codec = try Self.plainCodec(in: dir)
        let spawned = Mutex(0)
        let laneA = FaultGate()
        let waitedFor = Mutex<[UInt64]>([])
        let sealAhead = SealAhead(sealingThreads: 3, level: 1, codec: codec,
                                  spawn: { _ in spawned.withLock { $0 += 1 } },
                                  willSeal: { seq in
                                      if seq == Self.firstSeqs[1] { _ = laneA.pass() }
                                  },
                                  willWait: { seq in waitedFor.withLock { $0.append(seq) } })
        let segment = Self.firstSegment
        let blocks = Self.unevenBlocks(count: 5, firstSeq: 1000)
        sealAhead.setSegment(segment)
        for block in blocks.prefix(4) { sealAhead.offer(block) }
        #expect(spawned.withLock { $0 } == 2, "two lanes beside the writer, started at once")
        // Block 0 is taken by the writer before any lane ran: it seals it itself.
        #expect(sealAhead.take(blocks[0], for: segment) == nil)
        // Lane A takes block 1 and is held; lane B seals 2 and 3, finishing first.
        Thread { _ = sealAhead.sealNext() }.start()
        #expect(eventually { laneA.arrivals == 1 }, "lane A holds block 1")
        #expect(sealAhead.sealNext() && sealAhead.sealNext())
        // The writer waits for block 1 until lane A finishes it.
        let taken = Mutex<[SealAhead.Sealed?]>([])
        Thread {
            for block in blocks[1...3] {
                let sealed = sealAhead.take(block, for: segment)
                taken.withLock { $0.append(sealed) }
            }
        }.start()
        #expect(eventually { waitedFor.withLock { $0.contains(blocks[1].firstSeq) } }, "the writer waits for lane A's block")
        #expect(taken.withLock { $0.isEmpty }, "the writer took block 1 before its lane finished it")
        laneA.release()
        #expect(eventually { taken.withLock { $0.count } == 3 }, "the writer takes blocks 1-3 once lane A lets go")
        let serial = BlockEncoder(level: 1)
        for (index, sealed) in taken.withLock({ $0 }).enumerated() {
            let block = blocks[1 + index]
            let expected = try Self.serialEncoding(block, in: segment, by: serial)
            #expect(sealed?.bytes == expected.bytes, "block \(1 + index)")
            #expect(sealed?.header == expected.header && sealed?.header.firstSeq == block.firstSeq)
        }
        #expect(taken.withLock { $0 }.allSatisfy { $0 != nil }, "blocks 1-3 are the lanes'")
        // A roll: block 4 was sealed for the old segment, so the writer seals it again.
        sealAhead.offer(blocks[4])
        #expect(sealAhead.sealNext())
        let next = SegmentContext(baseSeq: blocks[4].firstSeq, createdMillis: 1_767_225_700_000)
        sealAhead.setSegment(next)
        #expect(sealAhead.take(blocks[4], for: next) == nil)
        // No lane finds anything left: each ends.
        #expect(!sealAhead.sealNext() && !sealAhead.sealNext())
    }

    static let firstSeqs = unevenBlocks(count: 5, firstSeq: 1000).map(\.firstSeq)

    /// The segment the blocks of ``unevenBlocks(count:firstSeq:)`` from seq 1000 go into.
    static let firstSegment = SegmentContext(baseSeq: 1000, createdMillis: 1_767_225_600_000)

    /// A codec with neither dictionary nor key, for a `SealAhead` driven by hand.
    static func plainCodec(in dir: TemporaryDirectory) throws -> LogCodec {
        try LogCodec(directory: dir.path, configuration: Configuration(), logID: LogID.random(),
                     inheritedThrough: nil, logger: Logger(label: "test"))
    }

    /// What one encoder makes of `block` in `segment`: what a lane's sealed form must equal.
    static func serialEncoding(_ block: PendingBlock, in segment: SegmentContext,
                               by encoder: BlockEncoder = BlockEncoder(level: 1)) throws -> (bytes: [UInt8], header: BlockHeader) {
        var bytes: [UInt8] = []
        let header = try encoder.encode(block, in: segment, into: &bytes)
        return (bytes, header)
    }

    /// A lane seals into the buffer of a block the writer already copied out (`recycle`), not a
    /// new one: the same storage comes back, and what it held before (copied out, as the
    /// writer's stage does) and what it holds now are each byte for byte one encoder's blocks.
    @Test func aLaneSealsIntoARecycledBufferAndNoTakenBlockChanges() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let codec = try Self.plainCodec(in: dir)
        let sealAhead = SealAhead(sealingThreads: 2, level: 1, codec: codec, spawn: { _ in })
        let segment = Self.firstSegment
        sealAhead.setSegment(segment)
        let blocks = Self.unevenBlocks(count: 3, firstSeq: 1000)
        for block in blocks { sealAhead.offer(block) }
        #expect(sealAhead.sealNext())
        var first = try #require(sealAhead.take(blocks[0], for: segment))
        var out: [UInt8] = []
        out.append(contentsOf: first.bytes)
        let storage = first.bytes.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) }
        sealAhead.recycle(&first.bytes)
        #expect(first.bytes.isEmpty, "recycle moves the buffer out")
        #expect(sealAhead.sealNext())
        let second = try #require(sealAhead.take(blocks[1], for: segment))
        #expect(second.bytes.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) } == storage,
                "the lane sealed block 1 into a new buffer, not the recycled one")
        #expect(out == (try Self.serialEncoding(blocks[0], in: segment).bytes), "block 0, copied out before its buffer was reused, changed")
        #expect(second.bytes == (try Self.serialEncoding(blocks[1], in: segment).bytes))
        #expect(sealAhead.take(blocks[2], for: segment) == nil, "block 2 was still queued: the writer seals it")
        #expect(!sealAhead.sealNext())
        #expect(sealAhead.held.blocks == 0)
    }

    /// Makes every write under `dir` take a millisecond longer, so blocks queue behind the
    /// writer even in a debug build (whose appends cannot outrun zstd): lanes then seal them,
    /// whatever the machine's speed, and the tests below exercise them every run.
    static func slowWrites(in dir: TemporaryDirectory) {
        FaultInjection.arm(.write, under: dir.path, times: 100_000, fault: .delay(.milliseconds(1)))
    }

    /// Buffered appends queued behind a slow writer, from one thread and from four, into small
    /// segments (rolls land among blocks lanes sealed for the segment before, which the writer
    /// seals again): every record reads back once, in seq order, and `verify` is clean.
    @Test(arguments: [1, 4])
    func bufferedAppendsSealedOnEveryCoreReadBackInOrder(threads: Int) throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanupFaults() }
        Self.slowWrites(in: dir)
        var configuration = smallConfiguration(blockSize: 4096, segmentSize: 64 * 1024)
        configuration.sealingThreads = 4
        configuration.linger = .milliseconds(50)
        let perThread = 6000 / threads
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        let seqs = Mutex([UInt64: [UInt8]]())
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for index in 0..<perThread {
                let bytes = index % 3 == 0 ? noisyPayload(thread * perThread + index, size: 300) : payload(thread * perThread + index)
                let seq = try! log.append(bytes)
                seqs.withLock { $0[seq] = bytes }
            }
        }
        let stats = log.stats()
        try log.close()
        let appended = seqs.withLock { $0 }
        #expect(stats.blocksSealedInParallel > 0, "no batch was sealed side by side: the test proves nothing")
        let reopened = try EventLog.open(directory: dir.path, configuration: configuration)
        defer { try? reopened.close() }
        let read = records(try reopened.readAll())
        #expect(read.map(\.seq) == Array(0..<UInt64(appended.count)))
        #expect(read.allSatisfy { appended[$0.seq] == $0.payload })
        #expect(try reopened.verify().isClean)
        #expect(dir.segments().count > 2)
    }

    /// With a trained dictionary, and with encryption, every lane gets the writer's
    /// dictionary and key: what is sealed side by side reads back, and `verify` is clean.
    @Test(arguments: [false, true])
    func sealingSideBySideKeepsTheDictionaryAndTheKey(encrypted: Bool) throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanupFaults() }
        Self.slowWrites(in: dir)
        var configuration = encrypted
            ? codecConfiguration(key: [UInt8](repeating: 0x5A, count: 32), segmentSize: 1024 * 1024)
            : codecConfiguration(dictionary: .train(size: 4096, afterSamples: 200), segmentSize: 1024 * 1024)
        configuration.blockSize = 4096
        configuration.sealingThreads = 3
        configuration.linger = .milliseconds(50)
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        for index in 0..<8000 { try log.append(payload(index)) }
        try log.syncBlocking()
        for index in 8000..<16000 { try log.append(payload(index)) }
        let stats = log.stats()
        try log.close()
        #expect(stats.blocksSealedInParallel > 0, "no batch was sealed side by side: the test proves nothing")
        let reopened = try EventLog.open(directory: dir.path, configuration: configuration)
        defer { try? reopened.close() }
        #expect(records(try reopened.readAll()).map(\.payload) == (0..<16000).map { payload($0) })
        let report = try reopened.verify()
        #expect(report.isClean)
        if !encrypted {
            #expect(try reopened.currentDictionary() != nil, "no dictionary was trained: the test proves nothing")
        }
    }

    /// Buffered appends sealed by lanes, synced at three points, then more appended and the
    /// power cut while they are in flight, keeping a random half of the unsynced pages (a disk
    /// writing back in any order): every synced record is there with its bytes, `verify` is
    /// clean (damage past the synced watermark is a torn tail), and the log appends again.
    @Test(arguments: 0..<4)
    func aPowerCutWhileLanesSealKeepsEverySyncedRecord(seed: Int) throws {
        let dir = TemporaryDirectory()
        FaultInjection.trackSyncs(under: dir.path, wholeFiles: true)
        defer { dir.cleanupFaults() }
        Self.slowWrites(in: dir)
        var configuration = smallConfiguration(blockSize: 4096, segmentSize: 128 * 1024)
        configuration.sealingThreads = 4
        configuration.linger = .milliseconds(50)
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        var synced: UInt64 = 0
        for round in 0..<4 {
            for _ in 0..<1500 {
                let seq = Int(log.nextSeq)
                try log.append(seq % 3 == 0 ? noisyPayload(seq, size: 300) : payload(seq))
            }
            if round < 3 {
                try log.syncBlocking()
                synced = log.nextSeq
            }
        }
        let stats = log.stats()
        try cutPower(closing: log, in: dir, unsynced: .pagesKept, seed: UInt64(seed))
        #expect(stats.blocksSealedInParallel > 0, "no batch was sealed side by side: the test proves nothing")
        let reopened = try EventLog.open(directory: dir.path, configuration: configuration)
        defer { try? reopened.close() }
        let read = records(try reopened.readAll()).prefix(Int(synced))
        #expect(read.map(\.seq) == Array(0..<synced), "seed \(seed)")
        #expect(read.allSatisfy { $0.payload == ($0.seq % 3 == 0 ? noisyPayload(Int($0.seq), size: 300) : payload(Int($0.seq))) })
        #expect(try reopened.verify().isClean, "seed \(seed)")
        let next = try reopened.append(payload(0))
        try reopened.syncBlocking()
        #expect(next >= synced)
    }

    /// A seeded schedule of `SealAhead` on one thread: appends offer blocks, lanes step, the
    /// writer takes blocks in seq order (offered or not), rolls change the segment, and the log
    /// may close, in any interleaving. After every take: a block comes back sealed only for
    /// the segment it is written into, byte for byte what one encoder makes there, and at most
    /// once. At the end nothing is held and every lane has ended. A failing seed replays exactly.
    @Test(arguments: 0..<300)
    func aSeededScheduleHandsEveryBlockBackOnceAndRight(seed: Int) throws {
        var random = SplitMix64(seed: UInt64(seed) &+ 3600)
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let codec = try Self.plainCodec(in: dir)
        let spawned = Mutex(0)
        let sealAhead = SealAhead(sealingThreads: 2 + Int(random.next() % 3), level: 1, codec: codec,
                                  spawn: { _ in spawned.withLock { $0 += 1 } })
        let blocks = Self.unevenBlocks(count: 12, firstSeq: 1000)
        // Which blocks an append fills (offered); the others the writer seals at its linger
        // deadline or for a waiting caller (never offered).
        let filledByAppend = blocks.map { _ in random.next() % 4 != 0 }
        var segment = Self.firstSegment
        sealAhead.setSegment(segment)
        var sealedIntoQueue = 0  // blocks in the writer's queue (offered under the same lock)
        var taken = 0
        var running = 0
        var closed = false
        var trace: [String] = []
        let serial = BlockEncoder(level: 1)
        while taken < blocks.count {
            running += spawned.withLock { count in defer { count = 0 }; return count }
            let step = random.next() % 6
            if step < 2, sealedIntoQueue < blocks.count, sealedIntoQueue <= taken + 4 {
                // The next block is sealed into the writer's queue (appends run a few blocks ahead).
                if filledByAppend[sealedIntoQueue] { sealAhead.offer(blocks[sealedIntoQueue]) }
                trace.append("\(filledByAppend[sealedIntoQueue] ? "offer" : "queue") \(sealedIntoQueue)")
                sealedIntoQueue += 1
            } else if step == 2, running > 0 {
                if !sealAhead.sealNext() { running -= 1 }
                trace.append("lane")
            } else if step == 3, random.next() % 4 == 0 {
                // A roll: the next blocks go into a new segment.
                segment = SegmentContext(baseSeq: blocks[taken].firstSeq, createdMillis: segment.createdMillis + 1000)
                sealAhead.setSegment(segment)
                trace.append("roll at \(taken)")
            } else if step == 4, !closed, random.next() % 40 == 0 {
                sealAhead.close()
                closed = true
                trace.append("close")
            } else if taken < sealedIntoQueue {
                // The writer writes the oldest block of its queue.
                let block = blocks[taken]
                let sealed = sealAhead.take(block, for: segment)
                trace.append("take \(taken) -> \(sealed == nil ? "sealed here" : "a lane's")")
                if let sealed {
                    let expected = try Self.serialEncoding(block, in: segment, by: serial)
                    #expect(sealed.bytes == expected.bytes && sealed.header == expected.header && sealed.segment == segment,
                            "seed \(seed): \(trace.joined(separator: ", "))")
                }
                #expect(sealAhead.take(block, for: segment) == nil, "seed \(seed): block \(taken) handed back twice")
                taken += 1
            }
        }
        while running > 0 {
            if !sealAhead.sealNext() { running -= 1 }
            running += spawned.withLock { count in defer { count = 0 }; return count }
        }
        let held = sealAhead.held
        #expect(held.blocks == 0, "seed \(seed): \(held.blocks) blocks held after all were taken: \(trace.joined(separator: ", "))")
        #expect(held.lanes == 0, "seed \(seed): \(held.lanes) lanes still counted as running")
    }

    /// A queue that never empties (each offer outruns one lane step): the consumed head of the
    /// queue is dropped as it goes, and every block still comes back in order, a lane's or
    /// sealed by the writer, with nothing held at the end.
    @Test func aQueueThatNeverEmptiesStillHandsBackEveryBlock() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let codec = try Self.plainCodec(in: dir)
        let sealAhead = SealAhead(sealingThreads: 2, level: 1, codec: codec, spawn: { _ in })
        let segment = Self.firstSegment
        sealAhead.setSegment(segment)
        let blocks = Self.unevenBlocks(count: 400, firstSeq: 1000).map { block -> PendingBlock in
            var small = block
            if small.raw.count > 2000 { small.reset(firstSeq: block.firstSeq); payload(0).withUnsafeBytes { small.add($0, timestamp: 1) } }
            return small
        }
        var taken = 0
        var fromLanes = 0
        for (index, block) in blocks.enumerated() {
            sealAhead.offer(block)
            if index % 2 == 1 { _ = sealAhead.sealNext() }
            // The writer trails the appends by a hundred blocks.
            if index >= 100 {
                if sealAhead.take(blocks[taken], for: segment) != nil { fromLanes += 1 }
                taken += 1
            }
        }
        while taken < blocks.count {
            if sealAhead.take(blocks[taken], for: segment) != nil { fromLanes += 1 }
            taken += 1
        }
        while sealAhead.sealNext() {}
        #expect(fromLanes > 100, "the lane sealed \(fromLanes) of 400")
        #expect(sealAhead.held.blocks == 0)
    }
}
