import Foundation
import Testing
@testable import Spool

/// Simulated power loss: every `fdatasync` and directory `fsync` Spool makes is recorded by the
/// file layer's sync tracker; after a workload, every file is cut back to what was synced (and
/// entries never made durable are removed), as a power cut would leave them. Then the log must
/// open, keep every record acknowledged at `synced` and every durable commit, return nothing
/// that was not appended, and go on appending.
@Suite struct PowerLossTests {
    /// What a workload promised before the power cut.
    struct Promises {
        var syncedEnd: UInt64 = 0
        var acknowledgedSynced = Set<UInt64>()
        var durableCommit: UInt64 = 0
        var lastCommit: UInt64 = 0
        /// The end of the furthest batch a consumer was handed (and could have uploaded).
        var deliveredThrough: UInt64 = 0
    }

    /// Appends, syncs and commits in a seeded random order on a log that rolls segments often.
    func workload(_ log: EventLog, seed: UInt64) async throws -> Promises {
        var generator = SeededGenerator(seed: seed)
        var promises = Promises()
        let consumer = try log.consumer(named: "c")
        for _ in 0..<(20 + Int(generator.next() % 40)) {
            switch generator.next() % 10 {
            case 0...4:
                for _ in 0..<(1 + Int(generator.next() % 30)) {
                    let seq = log.nextSeq
                    #expect(try log.append(noisyPayload(Int(seq), size: 50 + Int(generator.next() % 700))) == seq)
                }
            case 5, 6:
                let seq = log.nextSeq
                #expect(try await log.append(noisyPayload(Int(seq), size: 200), durability: .synced) == seq)
                promises.acknowledgedSynced.insert(seq)
            case 7:
                let seq = log.nextSeq
                #expect(try await log.append(noisyPayload(Int(seq), size: 300), durability: .written) == seq)
            case 8:
                guard log.nextSeq > consumer.committed else { continue }
                let batch = try await consumer.read(maxCount: 20)
                promises.deliveredThrough = max(promises.deliveredThrough, batch.endSeq)
                let through = consumer.committed + generator.next() % (log.nextSeq - consumer.committed)
                let mode: CommitMode = generator.next() % 2 == 0 ? .durable : .fast
                try await consumer.commit(upTo: through + 1, mode: mode)
                promises.lastCommit = through + 1
                if mode == .durable { promises.durableCommit = through + 1 }
            default:
                try await log.sync()
            }
        }
        promises.syncedEnd = log.syncedEnd
        return promises
    }

    /// Opens the rewound log and checks every promise; returns the next seq after one append.
    func checkAfterPowerLoss(_ dir: TemporaryDirectory, _ promises: Promises, appendedBefore: UInt64,
                             context: String) throws {
        let log = try EventLog.open(directory: dir.path, configuration: smallConfiguration(blockSize: 2048))
        defer { try? log.close() }
        let items = try log.readAll()
        let stored = records(items)
        for notice in notices(items) {
            #expect(notice.kind != .corrupt, "\(context): \(notice)")
        }
        var present = Set<UInt64>()
        var previous: UInt64?
        for record in stored {
            #expect(record.seq < appendedBefore, "\(context): seq \(record.seq) was never appended")
            #expect(record.payload.starts(with: Array("\(record.seq):".utf8)), "\(context): seq \(record.seq) holds another record")
            if let previous { #expect(record.seq > previous, "\(context): seqs out of order") }
            previous = record.seq
            present.insert(record.seq)
        }
        // Retention may have deleted what the durable commit passed; everything from there on that
        // was synced must be back.
        let floor = promises.durableCommit
        for seq in promises.acknowledgedSynced where seq >= floor {
            #expect(present.contains(seq), "\(context): seq \(seq), acknowledged at synced, is lost")
        }
        for seq in floor..<max(floor, promises.syncedEnd) {
            #expect(present.contains(seq), "\(context): seq \(seq), below syncedEnd \(promises.syncedEnd), is lost")
        }
        // What a consumer was handed may be on a server already: it was durable, so it is back,
        // and its seqs (the records' ids) are not handed out again to other records.
        for seq in floor..<max(floor, promises.deliveredThrough) {
            #expect(present.contains(seq), "\(context): seq \(seq), delivered to a consumer, is lost")
        }
        #expect(log.nextSeq >= promises.deliveredThrough, "\(context): delivered seqs below \(promises.deliveredThrough) would be reused")
        let committed = try log.consumer(named: "c").committed
        // A durable commit survives: consumers/ itself is made durable when it is created.
        #expect(committed >= promises.durableCommit, "\(context): the durable commit \(promises.durableCommit) went back to \(committed)")
        #expect(committed <= max(promises.lastCommit, log.firstSeq), "\(context): the offset \(committed) is past every commit")
        // Seqs go on past every stored record and every consumer offset: never reused under a reader.
        let next = log.nextSeq
        #expect(next >= (previous.map { $0 + 1 } ?? 0) && next >= committed, "\(context): next seq \(next)")
        #expect(try log.appendBlocking(noisyPayload(Int(next), size: 100), durability: .synced) == next)
        let report = try log.verify()
        #expect(report.corrupt.isEmpty, "\(context): \(report.corrupt)")
    }

    func run(seed: UInt64, unsynced: PowerLoss.Unsynced) async throws {
        let dir = TemporaryDirectory("powerLoss\(seed)")
        FaultInjection.trackSyncs(under: dir.path, wholeFiles: unsynced == .pagesKept)
        defer { dir.cleanupFaults() }
        let log = try EventLog.open(directory: dir.path, configuration: smallConfiguration(blockSize: 2048))
        var promises = try await workload(log, seed: seed)
        if unsynced == .pagesKept && seed % 2 == 1 {
            try await appendWrittenIntoANewSegment(log)
            promises.syncedEnd = log.syncedEnd
        }
        let appended = log.nextSeq
        // The power is cut here: whatever the close below writes is lost with the rest.
        var loss = PowerLoss.capture(dir.path, unsynced: unsynced, seed: seed)
        try log.close()
        FaultInjection.stopTracking(under: dir.path)
        #expect(loss.state.directories[dir.path]?["consumers"] != nil, "consumers/ was made durable when it was created")
        try loss.apply(to: dir.path)
        try checkAfterPowerLoss(dir, promises, appendedBefore: appended, context: "seed \(seed) \(unsynced)")
    }

    @Test(arguments: 0..<12)
    func everythingSyncedSurvivesDroppingAllUnsyncedWrites(seed: Int) async throws {
        try await run(seed: UInt64(seed), unsynced: .dropped)
    }

    @Test(arguments: 100..<112)
    func everythingSyncedSurvivesKeepingARandomPrefixOfUnsyncedWrites(seed: Int) async throws {
        try await run(seed: UInt64(seed), unsynced: .prefixKept)
    }

    /// Dirty pages reach the disk in any order: a power cut can keep a later page of the active
    /// segment and lose an earlier one (its header's, or one inside its blocks). The log must
    /// still open and append, keep every synced record, and call the never-synced damage a
    /// torn tail, not corruption (FORMAT.md §6, "The synced watermark"). Half the seeds end
    /// in an active segment never synced since its header was written, several pages long.
    @Test(arguments: 200..<260)
    func everythingSyncedSurvivesKeepingARandomSubsetOfUnsyncedPages(seed: Int) async throws {
        try await run(seed: UInt64(seed), unsynced: .pagesKept)
    }

    /// Appends at `written` until the log rolls to a new segment, then 20 more records (about
    /// 10 KiB, several pages), none of them synced.
    func appendWrittenIntoANewSegment(_ log: EventLog) async throws {
        let segments = log.lock.withLock { log.state.table.segments.count }
        while log.lock.withLock({ log.state.table.segments.count }) == segments {
            try await log.append(noisyPayload(Int(log.nextSeq), size: 700), durability: .written)
        }
        for _ in 0..<20 { try await log.append(noisyPayload(Int(log.nextSeq), size: 1000), durability: .written) }
    }

    /// Records written but not synced, handed to a consumer (which may upload them), then the
    /// power is cut: they must be back, not replaced by other records under the same seqs.
    @Test func whatAConsumerWasHandedSurvivesAPowerLoss() async throws {
        let dir = TemporaryDirectory.trackingSyncs()
        defer { dir.cleanupFaults() }
        let configuration = smallConfiguration(blockSize: 2048)
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        let consumer = try log.consumer(named: "c")
        for i in 0..<10 { try await log.append(noisyPayload(i, size: 100), durability: .written) }
        let batch = try await consumer.read(maxCount: 100)
        #expect(batch.records.map(\.seq) == Array(0..<10))
        for i in 10..<15 { try await log.append(noisyPayload(i, size: 100), durability: .written) }
        try cutPower(closing: log, in: dir)
        let reopened = try EventLog.open(directory: dir.path, configuration: configuration)
        #expect(records(try reopened.readAll()).map(\.seq).prefix(10) == ArraySlice(0..<10))
        #expect(reopened.nextSeq >= 10, "seqs a consumer was handed must not be handed out again")
        try reopened.close()
    }

    /// A fast commit, then a durable one of the same offset (an app's shutdown): the second
    /// must still make it durable. And a fast commit found at open is made durable there,
    /// since retention trusts it from then on.
    @Test func durableCommitAfterAFastOneOfTheSameOffsetIsDurable() async throws {
        for reopenInBetween in [false, true] {
            let dir = TemporaryDirectory.trackingSyncs()
            defer { dir.cleanupFaults() }
            var log = try EventLog.open(directory: dir.path)
            for i in 0..<10 { try await log.append(noisyPayload(i, size: 100), durability: .synced) }
            try await log.consumer(named: "c").commit(upTo: 5, mode: .fast)
            if reopenInBetween {
                try log.close()
                log = try EventLog.open(directory: dir.path)
            } else {
                try await log.consumer(named: "c").commit(upTo: 5, mode: .durable)
            }
            try cutPower(closing: log, in: dir)
            let reopened = try EventLog.open(directory: dir.path)
            #expect(try reopened.consumer(named: "c").committed == 5, "reopened in between: \(reopenInBetween)")
            try reopened.close()
        }
    }

    /// A log written (not synced) by a process that was then killed: the next process's
    /// consumer must not deliver those records until they are durable, else a power loss takes
    /// them and their seqs are handed out again under ids a server has already seen.
    @Test func recordsRecoveredAfterAKillAreDurableBeforeAConsumerGetsThem() async throws {
        let dir = TemporaryDirectory.trackingSyncs()
        defer { dir.cleanupFaults() }
        let configuration = smallConfiguration(blockSize: 2048)
        let first = try EventLog.open(directory: dir.path, configuration: configuration)
        for i in 0..<10 { try await first.append(noisyPayload(i, size: 100), durability: .written) }
        try first.close()  // as far as the disk goes, a kill: close writes but does not sync
        let second = try EventLog.open(directory: dir.path, configuration: configuration)
        let batch = try await second.consumer(named: "c").read(maxCount: 100)
        #expect(batch.records.map(\.seq) == Array(0..<10))
        try cutPower(closing: second, in: dir)
        let third = try EventLog.open(directory: dir.path, configuration: configuration)
        #expect(records(try third.readAll()).map(\.seq) == Array(0..<10))
        #expect(third.nextSeq == 10)
        try third.close()
    }

    /// Cuts the active segment at every offset past its last sync, and the offset file at every
    /// offset: the synced records survive, and the offset is a committed one or the oldest record.
    @Test func activeSegmentAndOffsetFileCutAtEveryOffset() async throws {
        let dir = TemporaryDirectory.trackingSyncs()
        defer { dir.cleanupFaults() }
        var configuration = smallConfiguration(blockSize: 1024)
        configuration.linger = .zero
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        let consumer = try log.consumer(named: "c")
        var commits: [UInt64] = [consumer.committed]
        for i in 0..<40 {
            let seq = try log.append(noisyPayload(i, size: 80))
            if i % 9 == 8 {
                try await consumer.commit(upTo: seq + 1, mode: i % 2 == 0 ? .durable : .fast)
                commits.append(seq + 1)
            }
        }
        let syncedSeq = try await log.append(noisyPayload(40, size: 80), durability: .synced)
        for i in 41..<60 { _ = try log.append(noisyPayload(i, size: 80)) }
        try await log.waitUntil(before: 60, is: .written)
        let state = FaultInjection.durableState(under: dir.path)!
        try log.close()
        FaultInjection.stopTracking(under: dir.path)
        let segmentName = dir.segments().last!
        let segment = dir.file(segmentName)
        let offsetPath = dir.file("consumers/c.offset")
        let segmentBytes = readFile(segment)
        let offsetBytes = readFile(offsetPath)
        let inode = { (path: String) -> UInt64 in
            var info = stat()
            stat(path, &info)
            return UInt64(info.st_ino)
        }
        // The fdatasync'd size includes the zeros synced writes preallocate past the data, so
        // a power loss leaves the data through the synced record, then any prefix of what was
        // written after it, then zeros up to that size (8 KiB of them at most here: how many
        // zeros follow changes nothing, and a 1 MiB file per cut would make this minutes long).
        let syncedSize = Int(state.files[inode(segment)]?.size ?? 0)
        let syncedBlock = blockHeaders(segmentBytes).first { $0.header.endSeq > syncedSeq }!
        let syncedEnd = syncedBlock.offset + syncedBlock.header.totalSize
        #expect(syncedEnd < segmentBytes.count, "records were written after the synced one")
        #expect(syncedSize >= syncedEnd)
        for cut in syncedEnd...segmentBytes.count {
            writeFile(segment, Array(segmentBytes[0..<cut]) + [UInt8](repeating: 0, count: min(8192, max(0, syncedSize - cut))))
            let reopened = try EventLog.open(directory: dir.path, configuration: configuration)
            let items = try reopened.readAll()
            #expect(notices(items).isEmpty, "cut at \(cut)")
            let seqs = records(items).map(\.seq)
            #expect(seqs == Array(0..<UInt64(seqs.count)), "cut at \(cut)")
            #expect(seqs.count > Int(syncedSeq), "cut at \(cut): synced seq \(syncedSeq) lost")
            try reopened.close()
        }
        writeFile(segment, segmentBytes)
        for cut in 0...offsetBytes.count {
            writeFile(offsetPath, Array(offsetBytes[0..<cut]))
            let reopened = try EventLog.open(directory: dir.path, configuration: configuration)
            let committed = try reopened.consumer(named: "c").committed
            #expect(commits.contains(committed), "cut at \(cut): offset \(committed) is none of \(commits)")
            try reopened.close()
        }
    }
}
