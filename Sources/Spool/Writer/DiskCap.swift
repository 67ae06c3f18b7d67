/// The disk cap (``Configuration/maxBytes``): what must go for a write, or a cold rewrite's
/// file, to fit. It decides, from the segment table, under the log's lock; the log executes
/// (cancels the rewrite, unlinks the segments, counts and logs the drop). Pure: no I/O.
struct DiskCap {
    /// The most bytes the log's segment files (and a cold rewrite's file) may take.
    let maxBytes: Int64

    /// What ``dropOldest(from:activeSizeAfter:rewriteGrowingTo:)`` decided.
    struct Drop: Equatable {
        /// The oldest sealed segments to delete, oldest first.
        var doomed: [SegmentInfo] = []
        /// Of each doomed segment (by base seq), the records no consumer has read yet: counted
        /// as dropped once it is deleted.
        var unread: [UInt64: Range<UInt64>] = [:]
        /// Bytes still over the cap once every doomed segment is gone: only the active segment
        /// is left (the writer's call; 0 for a rewrite's, or when it fits).
        var over: Int64 = 0
        /// The rewrite in flight gives way: its segment is among the doomed, or the write needs
        /// its reservation.
        var cancelsRewrite = false
    }

    /// The oldest sealed segments of `table` to delete until the active segment at
    /// `activeSizeAfter` (nil: as listed, or as a write in flight leaves it) and a cold rewrite's
    /// file (at `rewriteGrowingTo` for the rewrite's own call, else as far as it got) fit under
    /// the cap. For a write (`rewriteGrowingTo` nil), a rewrite in flight whose segment is in the
    /// way gives way (its reservation no longer counts, its segment may go); a rewrite asking
    /// for room stops before its own segment.
    func dropOldest(from table: SegmentTable, activeSizeAfter: Int64?, rewriteGrowingTo: Int64?) -> Drop {
        var total = table.bytesUnderCap(activeSizeAfter: activeSizeAfter, rewriteBytes: rewriteGrowingTo)
        var drop = Drop()
        let retention = table.retention
        let segments = table.segments
        var index = 0
        while total > maxBytes, index < segments.count - 1 {
            let segment = segments[index]
            if !drop.cancelsRewrite, let rewrite = table.rewrite, !rewrite.stop.isRaised, rewrite.baseSeq == segment.baseSeq {
                // The rewrite asks: it does not drop its own segment for its copy.
                if rewriteGrowingTo != nil { break }
                // A write needs the room: the rewrite gives way (nothing is replaced).
                drop.cancelsRewrite = true
                total -= rewrite.written
                continue
            }
            let end = segments[index + 1].baseSeq
            let from = retention.floor.map { max(segment.baseSeq, $0) } ?? segment.baseSeq
            if from < end { drop.unread[segment.baseSeq] = from..<end }
            drop.doomed.append(segment)
            total -= segment.size
            index += 1
        }
        drop.over = rewriteGrowingTo == nil ? total - maxBytes : 0
        return drop
    }

    /// What an append under `rejectNew` is told (``admit(framedBytes:pendingBytes:in:)``).
    enum Admission: Equatable {
        /// It fits with everything stored, pending and reserved.
        case admitted
        /// It fits only if the cold rewrite in flight gives up its reservation: appends come
        /// first, so the rewrite is cancelled.
        case admittedCancellingRewrite
        /// It does not fit: the log is at its cap.
        case refused
    }

    /// Whether a record of `framedBytes` may join the `pendingBytes` appends hold under
    /// `rejectNew`: the table's files (the active one as listed) plus everything pending must
    /// fit under the cap; a cold rewrite's reservation never makes an append fail, it gives way.
    func admit(framedBytes: Int, pendingBytes: Int, in table: SegmentTable) -> Admission {
        let needed = table.diskBytes + Int64(pendingBytes + framedBytes)
        if needed > maxBytes { return .refused }
        return needed + table.rewriteReservation > maxBytes ? .admittedCancellingRewrite : .admitted
    }

    /// Whether a cold rewrite's file may grow to `bytes` with nothing dropped: the table's bytes
    /// (the rewrite counted at `bytes`) and `pendingBytes` (what appends hold, which comes first
    /// under `rejectNew`; 0 under `dropOldest`) fit under the cap.
    func rewriteFits(growingTo bytes: Int64, in table: SegmentTable, pendingBytes: Int) -> Bool {
        table.bytesUnderCap(rewriteBytes: bytes) + Int64(pendingBytes) <= maxBytes
    }
}

/// The disk cap's execution: before each write of a batch, the writer loop makes room for it
/// (the segment writer itself knows nothing of the cap), and so does a cold rewrite for its file.
extension EventLog {
    /// Under `dropOldest`, deletes the oldest sealed segments until the write about to be made
    /// fits under `maxBytes`, counting the records no consumer had read yet as dropped.
    /// `activeSizeAfter` is the active segment's size once that write is done, as stored
    /// (compressed): charging records their uncompressed size would drop segments the write
    /// did not need. Runs on the writer thread, outside the lock, before each write.
    ///
    /// The candidates include the segments an earlier write of the same batch sealed (the
    /// writer loop notes each roll in the shared state before the next write): a batch that rolls many segments stays
    /// under the cap at every write, not only from the next batch on.
    func enforceCapBeforeWriting(activeSizeAfter: Int64) {
        guard let cap = configuration.maxBytes, configuration.capPolicy == .dropOldest else { return }
        capLock.withLock { dropOldest(toFit: Int64(cap), activeSizeAfter: activeSizeAfter, rewriteGrowingTo: nil) }
    }

    /// Makes room under the cap for a cold rewrite's temporary file to grow to `bytes`, and
    /// counts it there: under `dropOldest`, by dropping the oldest sealed segments before the
    /// one being rewritten (never that one: the rewrite then waits), as a write would for its
    /// own bytes; under `rejectNew`, only if the room is free (appends come first). False when
    /// there is no room, or the rewrite must stop (cancelled, the files let go). Rewrite's
    /// thread, no lock held.
    func makeRoomForRewrite(growingTo bytes: Int64) -> Bool {
        func note() -> Bool {
            lock.withLock {
                guard state.rewriteMayContinue else { return false }
                if let cap = configuration.maxBytes {
                    // Under `rejectNew`, what appends hold pending comes first.
                    let pending = configuration.capPolicy == .rejectNew ? state.pending.bytes : 0
                    guard DiskCap(maxBytes: Int64(cap)).rewriteFits(growingTo: bytes, in: state.table, pendingBytes: pending) else { return false }
                }
                state.noteRewriteWritten(bytes)
                return true
            }
        }
        guard let cap = configuration.maxBytes else { return note() }
        return capLock.withLock {
            if configuration.capPolicy == .dropOldest {
                dropOldest(toFit: Int64(cap), activeSizeAfter: nil, rewriteGrowingTo: bytes)
            }
            return note()
        }
    }

    /// Deletes the oldest sealed segments until the active segment at `activeSizeAfter` (nil:
    /// as listed) and a cold rewrite's file (at `rewriteGrowingTo` for the rewrite's own call,
    /// else as far as it got) fit under `cap`: ``DiskCap/dropOldest(from:activeSizeAfter:rewriteGrowingTo:)``
    /// decides under the lock, this executes (cancels the rewrite, unlinks, counts, logs).
    /// The writer's call cancels a rewrite whose segment it must drop; the rewrite's call stops
    /// before its own segment. `capLock` held.
    private func dropOldest(toFit cap: Int64, activeSizeAfter: Int64?, rewriteGrowingTo: Int64?) {
        let plan: DiskCap.Drop = lock.withLock {
            // A rewrite that must stop drops nothing for a file it will not write.
            if rewriteGrowingTo != nil && !state.rewriteMayContinue { return DiskCap.Drop() }
            // The shared state lists the writer's active segment last, at its size before this
            // write; a rewrite counts it at the size the writer's write in flight leaves it.
            if let activeSizeAfter { state.noteActiveSizeBeingWritten(activeSizeAfter) }
            let plan = DiskCap(maxBytes: cap).dropOldest(from: state.table, activeSizeAfter: activeSizeAfter,
                                                         rewriteGrowingTo: rewriteGrowingTo)
            if plan.cancelsRewrite { state.cancelRewrite() }
            return plan
        }
        let (doomed, unread, over) = (plan.doomed, plan.unread, plan.over)
        if over > 0 {
            // Nothing sealed is left to drop: the active segment and this write alone pass the
            // cap (a cap below segmentSize plus a batch). Said, never silent.
            logger.warning("a write takes the log past Configuration.maxBytes: only the active segment is left", metadata: [
                "over": "\(over)", "cap": "\(cap)",
            ])
        }
        guard !doomed.isEmpty else { return }
        var removed = Set<UInt64>()
        do {
            try deleteSegments(doomed, removed: &removed)
        } catch {
            logger.error("could not delete segments to stay under the cap", metadata: ["error": "\(error)"])
        }
        // Count what is gone, even when a later unlink failed: no drop goes uncounted.
        guard !removed.isEmpty else { return }
        let lost = doomed.compactMap { removed.contains($0.baseSeq) ? unread[$0.baseSeq] : nil }
        let count = lost.reduce(UInt64(0)) { $0 + ($1.upperBound - $1.lowerBound) }
        lock.withLock { state.countDropped(records: count, segments: removed.count) }
        metrics.droppedRecords.increment(by: Int(count))
        if count > 0 {
            logger.warning("dropped the oldest records to stay under Configuration.maxBytes", metadata: [
                "records": "\(count)", "ranges": "\(lost.map { "\($0.lowerBound)..<\($0.upperBound)" })", "cap": "\(cap)",
            ])
        }
    }
}
