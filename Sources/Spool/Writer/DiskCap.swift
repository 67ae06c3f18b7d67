/// The disk cap (``Configuration/maxBytes`` with `dropOldest`): before each write of a batch,
/// the writer loop makes room for it (the segment writer itself knows nothing of the cap).
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
                    let pending = configuration.capPolicy == .rejectNew ? Int64(state.pendingBytes) : 0
                    guard state.bytesUnderCap(rewriteBytes: bytes) + pending <= Int64(cap) else { return false }
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
    /// else as far as it got) fit under `cap`. The writer's call cancels a rewrite whose segment
    /// it must drop; the rewrite's call stops before its own segment. `capLock` held.
    private func dropOldest(toFit cap: Int64, activeSizeAfter: Int64?, rewriteGrowingTo: Int64?) {
        let (doomed, unread, over): ([SegmentInfo], [UInt64: Range<UInt64>], Int64) = lock.withLock {
            // A rewrite that must stop drops nothing for a file it will not write.
            if rewriteGrowingTo != nil && !state.rewriteMayContinue { return ([], [:], 0) }
            // The shared state lists the writer's active segment last, at its size before this
            // write; a rewrite counts it at the size the writer's write in flight leaves it.
            if let activeSizeAfter { state.noteActiveSizeBeingWritten(activeSizeAfter) }
            var total = state.bytesUnderCap(activeSizeAfter: activeSizeAfter, rewriteBytes: rewriteGrowingTo)
            var doomed = [SegmentInfo]()
            var unread = [UInt64: Range<UInt64>]()
            let floor = state.retentionFloor
            var index = 0
            while total > cap, index < state.segments.count - 1 {
                let segment = state.segments[index]
                if let rewrite = state.rewrite, !rewrite.stop.isRaised, rewrite.baseSeq == segment.baseSeq {
                    // The rewrite asks: it does not drop its own segment for its copy.
                    if rewriteGrowingTo != nil { break }
                    // A write needs the room: the rewrite gives way (nothing is replaced).
                    state.cancelRewrite()
                    total -= rewrite.written
                    continue
                }
                let end = state.segments[index + 1].baseSeq
                let from = floor.map { max(segment.baseSeq, $0) } ?? segment.baseSeq
                if from < end { unread[segment.baseSeq] = from..<end }
                doomed.append(segment)
                total -= segment.size
                index += 1
            }
            return (doomed, unread, rewriteGrowingTo == nil ? total - cap : 0)
        }
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
