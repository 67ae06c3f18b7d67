#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Logging

/// What `EventLog.recompressSealedSegments()` rewrote.
public struct RecompressionReport: Sendable, Equatable {
    /// Sealed segments rewritten by this call.
    public var segmentsRewritten = 0
    /// Their bytes on disk before.
    public var bytesBefore: Int64 = 0
    /// Their bytes on disk after.
    public var bytesAfter: Int64 = 0

    /// Nothing rewritten.
    public init() {}
}

/// Cold recompression's own state, behind its own lock: whether its background thread runs,
/// and the segments it has settled (already rewritten, or to be left as they are). Driven by
/// `EventLog`, which asks it whether to start a run, whether a run ends, and which segments to
/// skip. The rewrite in flight is the segment table's (``SegmentTable/rewrite``: the cap counts
/// it under the log's lock); its interruption is that rewrite's ``StopFlag``, which the
/// compression polls every ``ZstdCompressor/interruptionStep`` bytes without any lock. Its lock
/// is taken under the log's (a roll asks for a run while the writer publishes), never the
/// other way round.
final class Recompressor: Sendable {
    struct State {
        /// The background thread is working (one at a time).
        var running = false
        /// A run was asked for while it worked: it looks once more before it ends.
        var again = false
        /// Bases of segments never to look at again in this process: rewritten (here, or by
        /// an earlier process: the header says so), damaged, holding a block no key here
        /// opens, or not made smaller.
        var settled: Set<UInt64> = []
    }
    private let state = RankedMutex(.recompressor, State())

    /// A run is asked for (after open, after a roll): true when the caller is to start the
    /// background thread; false when it runs already (it then looks once more before it ends).
    func requestRun() -> Bool {
        state.withLock { state in
            if state.running {
                state.again = true
                return false
            }
            state.running = true
            return true
        }
    }

    /// The background thread starts a pass over the candidates: runs asked for until now are
    /// served by it.
    func beginPass() {
        state.withLock { $0.again = false }
    }

    /// The background thread finished a pass: true when it ends (no run was asked for during
    /// the pass); false when it must look once more.
    func finishPass() -> Bool {
        state.withLock { state in
            if state.again { return false }
            state.running = false
            return true
        }
    }

    /// The bases of the segments settled so far.
    var settled: Set<UInt64> { state.withLock { $0.settled } }

    /// Never looks at the segment at `baseSeq` again in this process.
    func settle(_ baseSeq: UInt64) {
        state.withLock { _ = $0.settled.insert(baseSeq) }
    }
}

/// One sealed segment as a ``RecordSource``: what a rewrite reads, through the same cursor
/// (and so the same checks) as every reader. Its records end at the next segment's base.
private final class SealedSegmentSource: RecordSource {
    let directory: String
    let id: LogID
    let codec: LogCodec
    private let segment: SegmentInfo
    private let end: UInt64

    init(directory: String, id: LogID, codec: LogCodec, segment: SegmentInfo, end: UInt64) {
        self.directory = directory
        self.id = id
        self.codec = codec
        self.segment = segment
        self.end = end
    }

    func readableSegments(durableOnly: Bool) -> (segments: [SegmentInfo], end: UInt64) {
        // The next segment, listed empty, makes this one sealed to the cursor (it stops at `end`).
        ([segment, SegmentInfo(baseSeq: end, size: 0)], end)
    }

    var resumedSeq: UInt64? { nil }
}

extension EventLog {
    /// How one segment's rewrite ended.
    private enum RewriteEnd {
        /// The new file took the segment's name.
        case replaced(before: Int64, after: Int64)
        /// Left as it is for good (damaged, missing seqs, no key, not made smaller).
        case settled
        /// Not now (no room under the cap, the cap or retention took it, the files are being
        /// let go): a later run looks again.
        case later
        /// Another thread's rewrite is in flight (the background one, or a call's).
        case busy
    }

    /// Starts the background thread that rewrites cold segments, unless it runs already (it
    /// then looks once more before it ends). After open and after each roll; the log's lock
    /// may be held: the thread is made on the retention queue, not under it.
    func scheduleRecompression() {
        guard configuration.coldCompression?.inBackground == true, !configuration.suspendsWhenIdle else { return }
        guard recompressor.requestRun() else { return }
        retentionQueue.async { [self] in startRecompressionThread() }
    }

    /// The background thread of ``scheduleRecompression()``, at `nice` 19.
    private func startRecompressionThread() {
        let thread = Thread { [self] in
            lowerThreadPriority()
            while true {
                recompressor.beginPass()
                do {
                    _ = try recompressCandidates(waitingForOthers: false)
                } catch {
                    logger.warning("cold recompression stopped; it looks again after the next roll", metadata: ["error": "\(error)"])
                }
                if recompressor.finishPass() { return }
            }
        }
        thread.name = "spool-recompress"
        thread.qualityOfService = .background
        thread.start()
    }

    /// Rewrites every sealed segment cold recompression would rewrite in the background, now,
    /// on the calling thread (``Configuration/coldCompression``; nothing when it is nil). For
    /// a backlog about to be kept for long (an app going offline), a benchmark, or a test.
    /// Blocking: call it from a thread of your own, or call its `async` form.
    /// - Returns: what it rewrote; a segment the background thread rewrote meanwhile is not in it.
    /// - Throws: `.io`/`.diskFull` when a new file cannot be written (the old one stays);
    ///   `.closed` once the log is closed.
    @discardableResult
    public func recompressSealedSegments() throws -> RecompressionReport {
        guard configuration.coldCompression != nil else { return RecompressionReport() }
        if let error = lock.withLock({ state.status.closeRequested ? SpoolError(.closed, "the log is closed", path: directory) : nil }) {
            throw error
        }
        return try recompressCandidates(waitingForOthers: true)
    }

    /// `recompressSealedSegments()` off Swift's cooperative pool.
    @discardableResult
    public func recompressSealedSegments() async throws -> RecompressionReport {
        try await offload { try self.recompressSealedSegments() }
    }

    /// Rewrites the candidates oldest first until none is left or one must wait. A rewrite of
    /// another thread in flight ends the background thread's run (the other does the work), and
    /// holds a caller's (`waitingForOthers`) until it ends: the call returns with nothing left.
    private func recompressCandidates(waitingForOthers: Bool) throws -> RecompressionReport {
        var report = RecompressionReport()
        while let (segment, end, header) = try nextCandidate() {
            switch try rewrite(segment, end: end, header: header) {
            case .busy:
                guard waitingForOthers else { return report }
                lock.withLock {
                    while state.table.rewrite != nil && !state.status.filesReleased {
                        lock.progressWait(until: monotonicNanos() + 50_000_000)
                    }
                }
            case .replaced(let before, let after):
                report.segmentsRewritten += 1
                report.bytesBefore += before
                report.bytesAfter += after
                settle(segment)
            case .settled:
                settle(segment)
            case .later:
                return report
            }
        }
        return report
    }

    /// The oldest sealed segment not yet settled that some consumer still needs (or any, with
    /// no consumer), with the next segment's base and its header; nil when none is left.
    private func nextCandidate() throws -> (SegmentInfo, UInt64, SegmentHeader)? {
        let (segments, retention, allowed) = lock.withLock { (state.table.segments, state.table.retention, !state.status.filesReleased) }
        guard allowed, segments.count > 1 else { return nil }
        let settled = recompressor.settled
        for index in 0..<(segments.count - 1) {
            let segment = segments[index]
            let end = segments[index + 1].baseSeq
            if settled.contains(segment.baseSeq) { continue }
            if retention.passes(segmentEndingAt: end) { continue }  // retention deletes it
            let header: SegmentHeader?
            do {
                let reader = try SegmentReader(path: directory + "/" + segment.name, baseSeq: segment.baseSeq, limit: segment.size)
                header = try reader.checkHeader(logID: id) == nil ? reader.header : nil
            } catch let error as SpoolError where error.errno == .noSuchFileOrDirectory {
                continue  // deleted since the list was taken
            } catch {
                header = nil
            }
            // A damaged or unreadable header is left for recovery; a rewritten one is done.
            guard let header, !header.isRecompressed else {
                settle(segment)
                continue
            }
            return (segment, end, header)
        }
        return nil
    }

    /// Never looks at `segment` again in this process.
    private func settle(_ segment: SegmentInfo) {
        recompressor.settle(segment.baseSeq)
    }

    /// Rewrites one sealed segment into `<name>.tmp` (its own header with the recompressed
    /// flag, blocks of ``ColdCompression/blockSize`` at ``ColdCompression/level``), makes it
    /// durable, and renames it over the segment if the segment is still listed as it was. A
    /// crash at any point leaves the old file or the new one, both whole and durable (a
    /// leftover temporary file is removed at the next open).
    private func rewrite(_ listed: SegmentInfo, end: UInt64, header old: SegmentHeader) throws -> RewriteEnd {
        guard let cold = configuration.coldCompression else { return .later }
        guard let (segment, stop) = lock.withLock({ state.beginRewrite(of: listed) }) else {
            return lock.withLock { state.table.rewrite != nil } ? .busy : .later
        }
        var replacedSize: Int64?
        defer {
            let (count, bytes) = lock.withLock {
                state.finishRewrite(replacedBy: replacedSize)
                lock.broadcastProgress()
                return (state.table.segments.count, state.table.diskBytes)
            }
            if let replacedSize {
                metrics.segmentsRecompressed.increment()
                metrics.recompressionSavedBytes.increment(by: Int(segment.size - replacedSize))
                metrics.recordSegments(count: count, diskBytes: bytes)
            }
        }
        let path = directory + "/" + segment.name
        let temporary = path + Format.temporarySuffix
        try DirectoryIO.remove(temporary)
        let file = try FileIO.open(temporary, .createNew(permissions: configuration.fileMode))
        var renamed = false
        defer {
            file.close()
            if !renamed { try? DirectoryIO.remove(temporary) }
        }
        let newHeader = SegmentHeader(baseSeq: segment.baseSeq, createdMillis: old.createdMillis, logID: id,
                                      version: Format.segmentVersion, flags: SegmentHeader.recompressedFlag)
        var size = Int64(Format.segmentHeaderSize)
        guard makeRoomForRewrite(growingTo: size) else { return .later }
        try file.write(newHeader.encoded(), at: 0)
        let context = SegmentContext(baseSeq: segment.baseSeq, createdMillis: old.createdMillis, version: Format.segmentVersion)
        let encoder = BlockEncoder(level: cold.level)
        codec.prepareForRewrite(encoder)
        // close(), suspend() and the cap stop it within a step of a block, not after the block:
        // the state raises the flag, which the compression polls without the log's lock.
        encoder.interruption = stop
        var block = PendingBlock()
        block.reset(firstSeq: segment.baseSeq)
        var out = [UInt8]()
        out.reserveCapacity(ZstdCompressor.bound(cold.blockSize) + Format.blockHeaderSize)

        /// Seals `block`, waits for room under the cap, writes it. False: stop (settled or later
        /// in `ending`; later too when close(), suspend() or the cap stopped the compression).
        var ending: RewriteEnd?
        func flush() throws -> Bool {
            guard !block.isEmpty else { return true }
            out.removeAll(keepingCapacity: true)
            do {
                try encoder.encode(block, in: context, into: &out)
            } catch is ZstdCompressor.Interrupted {
                ending = .later
                return false
            }
            if size + Int64(out.count) >= segment.size {
                ending = .settled  // not smaller: keep the file the writer made
                return false
            }
            guard makeRoomForRewrite(growingTo: size + Int64(out.count)) else {
                ending = .later
                return false
            }
            try file.write(out, at: size)
            size += Int64(out.count)
            block.reset(firstSeq: block.firstSeq + UInt64(block.count))
            return true
        }

        let cursor = LogCursor(log: SealedSegmentSource(directory: directory, id: id, codec: codec, segment: segment, end: end),
                               from: segment.baseSeq)
        var expected = segment.baseSeq
        do {
            while let item = try cursor.next() {
                // Damage, or seqs the segment does not hold: keep the file as recovery's evidence.
                guard case .record(let record) = item, record.seq == expected else { return .settled }
                if !block.isEmpty && block.raw.count + PendingBlock.framedSize(record.payload.count) > cold.blockSize {
                    guard try flush() else { return ending ?? .later }
                }
                record.payload.withUnsafeBytes { block.add($0, timestamp: record.timestamp) }
                expected += 1
            }
        } catch let error as SpoolError where error.code == .missingKey || error.code == .corrupt {
            return .settled  // a block no key here opens, or a dictionary that is gone
        }
        guard try flush() else { return ending ?? .later }
        guard expected == end, expected > segment.baseSeq else { return .settled }
        try file.syncData()

        // The rename, while no unlink can run: only over the file still listed as it was.
        segmentFiles.lock()
        let stillListed = lock.withLock {
            state.rewriteMayContinue && state.table.segments.contains { $0.baseSeq == segment.baseSeq && $0.size == segment.size }
        }
        guard stillListed else {
            segmentFiles.unlock()
            return .later
        }
        do {
            try DirectoryIO.rename(temporary, to: path)
        } catch {
            segmentFiles.unlock()
            throw error
        }
        renamed = true
        replacedSize = size
        segmentFiles.unlock()
        codec.dictionaries.noteRewritten(segment: segment.baseSeq)
        do {
            try DirectoryIO.sync(directory)
        } catch {
            // Either file is whole and durable: a power cut may only bring the old one back.
            logger.warning("the directory could not be synced after a cold rewrite", metadata: ["error": "\(error)"])
        }
        logger.debug("recompressed a sealed segment", metadata: [
            "segment": "\(segment.name)", "before": "\(segment.size)", "after": "\(size)",
        ])
        return .replaced(before: segment.size, after: size)
    }

}

/// Puts the calling thread at the lowest scheduling priority (`nice` 19): cold recompression
/// takes only what appends, the writer and the sealing lanes leave. On Linux the nice value
/// is a thread's own; elsewhere the thread's background quality of service does it.
private func lowerThreadPriority() {
    #if os(Linux)
    _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)
    #endif
}
