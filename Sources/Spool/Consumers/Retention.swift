extension EventLog {
    /// Deletes the sealed segments every consumer has passed: the writer's own, and those that
    /// committers in other processes committed (``readDetachedOffsets()``). Called after a
    /// durable commit, and on the retention queue after a segment is sealed.
    /// A log with no consumer keeps everything (until a cap applies).
    ///
    /// The offsets that allow the deletion are durable before this runs (rule: persist the
    /// checkpoint before deleting what it makes unneeded); a crash mid-way leaves whole files
    /// that the next open sees as ordinary sealed segments.
    ///
    /// A commit's retention runs on the committing thread; `close()` waits for one in flight
    /// before it releases the directory lock, and none starts once `close()` is called: a new
    /// owner of the directory never has segments deleted under it.
    func applyRetention() throws {
        if lock.withLock({ state.closeRequested }) { return }
        readDetachedOffsets()
        let doomed: [SegmentInfo] = lock.withLock {
            guard !state.closeRequested, let floor = state.consumerOffsets.values.min(), state.segments.count > 1 else { return [] }
            var result = [SegmentInfo]()
            for index in 0..<(state.segments.count - 1) where state.segments[index + 1].baseSeq <= floor {
                result.append(state.segments[index])
            }
            if !result.isEmpty { state.retentionsInFlight += 1 }
            return result
        }
        guard !doomed.isEmpty else { return }
        var removed = Set<UInt64>()
        defer {
            lock.withLock {
                state.counters.retainedSegmentsDeleted += UInt64(removed.count)
                state.retentionsInFlight -= 1
                lock.broadcastProgress()
            }
            metrics.segmentsDeleted.increment(by: removed.count)
        }
        try deleteSegments(doomed, removed: &removed)
    }

    /// Queues a retention run after a segment was sealed, off the writer thread (its unlinks and
    /// directory `fsync` must not delay appends): consumers in other processes may have passed
    /// older segments, and this is when the writer learns it. One run queued at a time. Lock held.
    func scheduleRetention() {
        guard !state.retentionQueued, !state.closeRequested else { return }
        state.retentionQueued = true
        retentionQueue.async { [self] in
            lock.withLock { state.retentionQueued = false }
            do { try applyRetention() } catch {
                logger.warning("retention could not delete passed segments; it runs again after the next roll", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Reads the offsets that committers in other processes (``DetachedConsumer``, a sidecar
    /// `spool sync`) wrote, so that retention and the cap's count of unread records use them:
    /// a consumer this process has not made is read from its file, which only its committer
    /// writes (and only with durable commits). A file that cannot be read keeps the offset
    /// known before, and a new file joins at its offset: records are never deleted past what
    /// its committer committed. Changes no file.
    func readDetachedOffsets() {
        let folder = Consumers.directory(of: directory)
        guard DirectoryIO.exists(folder), let files = try? DirectoryIO.list(folder) else { return }
        let inProcess = consumerCache.names
        var read = [String: UInt64]()
        for file in files where file.hasSuffix(Format.offsetSuffix) {
            let name = String(file.dropLast(Format.offsetSuffix.count))
            guard !inProcess.contains(name), (try? Consumers.validate(name)) != nil,
                  let slot = (try? OffsetFile.read(folder + "/" + file)) ?? nil else { continue }
            read[name] = slot.nextSeq
        }
        guard !read.isEmpty else { return }
        lock.withLock {
            for (name, seq) in read where !inProcess.contains(name) { state.consumerOffsets[name] = seq }
        }
    }

    /// Under `dropOldest`, deletes the oldest sealed segments until the write about to be made
    /// fits under `maxBytes`, counting the records no consumer had read yet as dropped.
    /// `activeSizeAfter` is the active segment's size once that write is done, as stored
    /// (compressed): charging records their uncompressed size would drop segments the write
    /// did not need. Runs on the writer thread, outside the lock, before each write.
    ///
    /// The candidates include the segments an earlier write of the same batch sealed (each roll
    /// is noted in the shared state as it happens): a batch that rolls many segments stays
    /// under the cap at every write, not only from the next batch on.
    func enforceCapBeforeWriting(activeSizeAfter: Int64) {
        guard let cap = configuration.maxBytes, configuration.capPolicy == .dropOldest else { return }
        let (doomed, unread, over): ([SegmentInfo], [UInt64: Range<UInt64>], Int64) = lock.withLock {
            // The shared state lists the writer's active segment last, at its size before this write.
            var total = state.diskBytes - (state.segments.last?.size ?? 0) + activeSizeAfter
            var doomed = [SegmentInfo]()
            var unread = [UInt64: Range<UInt64>]()
            let floor = state.consumerOffsets.values.min() ?? 0
            var index = 0
            while total > Int64(cap), index < state.segments.count - 1 {
                let segment = state.segments[index]
                let end = state.segments[index + 1].baseSeq
                let from = state.consumerOffsets.isEmpty ? segment.baseSeq : max(segment.baseSeq, floor)
                if from < end { unread[segment.baseSeq] = from..<end }
                doomed.append(segment)
                total -= segment.size
                index += 1
            }
            return (doomed, unread, total - Int64(cap))
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
        lock.withLock {
            state.counters.droppedRecords += count
            state.counters.droppedSegments += UInt64(removed.count)
        }
        metrics.droppedRecords.increment(by: Int(count))
        if count > 0 {
            logger.warning("dropped the oldest records to stay under Configuration.maxBytes", metadata: [
                "records": "\(count)", "ranges": "\(lost.map { "\($0.lowerBound)..<\($0.upperBound)" })", "cap": "\(cap)",
            ])
        }
    }

    /// Unlinks sealed segments and makes the deletions durable. Each is forgotten before it is
    /// unlinked, so the shared state never lists a file that is gone: a reader that finds a
    /// listed file missing knows it was removed outside Spool. A segment that could not be
    /// unlinked is listed again; every one unlinked has its base added to `removed`.
    func deleteSegments(_ doomed: [SegmentInfo], removed: inout Set<UInt64>) throws {
        let forgotten = lock.withLock { () -> [SegmentInfo] in
            let active = state.segments.last?.baseSeq
            let bases = Set(doomed.map(\.baseSeq))
            let forgotten = state.segments.filter { bases.contains($0.baseSeq) && $0.baseSeq != active }
            state.segments.removeAll { bases.contains($0.baseSeq) && $0.baseSeq != active }
            return forgotten
        }
        do {
            defer {
                let kept = forgotten.filter { !removed.contains($0.baseSeq) }
                let (count, bytes) = lock.withLock {
                    for segment in kept {
                        let index = state.segments.firstIndex { $0.baseSeq > segment.baseSeq } ?? state.segments.endIndex
                        state.segments.insert(segment, at: index)
                    }
                    return (state.segments.count, state.diskBytes)
                }
                metrics.recordSegments(count: count, diskBytes: bytes)
            }
            for segment in forgotten {
                try DirectoryIO.remove(directory + "/" + segment.name)
                removed.insert(segment.baseSeq)
            }
            try DirectoryIO.sync(directory)
        }
        try codec.dictionaries.removeUnused { lock.withLock { state.segments } }
    }
}
