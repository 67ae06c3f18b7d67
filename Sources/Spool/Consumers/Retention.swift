/// What retention keeps: every record at or past `floor`, the lowest offset any consumer
/// committed; a log with no consumer keeps everything (until a cap applies). It decides which
/// segments are passed; `EventLog.applyRetention` deletes them.
struct Retention: Equatable {
    /// The lowest committed offset of every consumer, or nil when the log has none.
    var floor: UInt64?

    /// Whether a segment whose records end (exclusive) at `end` is passed by every consumer.
    func passes(segmentEndingAt end: UInt64) -> Bool {
        guard let floor else { return false }
        return end <= floor
    }

    /// The sealed segments of `segments` (sealed ones, then the active one, by base seq) that
    /// every consumer has passed, oldest first: a segment's records end where the next begins.
    /// Never the active one.
    func passedSegments(of segments: [SegmentInfo]) -> [SegmentInfo] {
        guard floor != nil, segments.count > 1 else { return [] }
        var passed = [SegmentInfo]()
        for index in 0..<(segments.count - 1) where passes(segmentEndingAt: segments[index + 1].baseSeq) {
            passed.append(segments[index])
        }
        return passed
    }
}

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
        if lock.withLock({ state.status.filesReleased }) { return }
        readDetachedOffsets()
        let doomed = lock.withLock { state.beginRetention() }
        guard !doomed.isEmpty else { return }
        var removed = Set<UInt64>()
        defer {
            lock.withLock {
                state.finishRetention(deleted: removed.count)
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
        guard state.queueRetention() else { return }
        retentionQueue.async { [self] in
            lock.withLock { state.retentionDequeued() }
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
            for (name, seq) in read where !inProcess.contains(name) { state.recordCommit(of: name, at: seq) }
        }
    }

    /// Unlinks sealed segments and makes the deletions durable. Each is forgotten before it is
    /// unlinked, so the shared state never lists a file that is gone: a reader that finds a
    /// listed file missing knows it was removed outside Spool. A segment that could not be
    /// unlinked is listed again; every one unlinked has its base added to `removed`.
    func deleteSegments(_ doomed: [SegmentInfo], removed: inout Set<UInt64>) throws {
        var forgotten = [SegmentInfo]()
        do {
            defer {
                let kept = forgotten.filter { !removed.contains($0.baseSeq) }
                let (count, bytes) = lock.withLock {
                    state.relistSegments(kept)
                    return (state.table.segments.count, state.table.diskBytes)
                }
                metrics.recordSegments(count: count, diskBytes: bytes)
            }
            // Held from the forgetting to the last unlink: a cold rewrite that checked its
            // segment is listed renames before all of this or after (and then finds it gone).
            try segmentFiles.withLock {
                forgotten = lock.withLock { state.forgetSegments(doomed) }
                for segment in forgotten {
                    try DirectoryIO.remove(directory + "/" + segment.name)
                    removed.insert(segment.baseSeq)
                }
            }
            try DirectoryIO.sync(directory)
        }
        try codec.dictionaries.removeUnused { lock.withLock { state.table.segments } }
    }
}
