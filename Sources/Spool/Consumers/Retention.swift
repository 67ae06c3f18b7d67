extension EventLog {
    /// Deletes the sealed segments every consumer has passed. Called after a commit.
    /// A log with no consumer keeps everything (until a cap applies).
    ///
    /// The offsets that allow the deletion are durable before this runs (rule: persist the
    /// checkpoint before deleting what it makes unneeded); a crash mid-way leaves whole files
    /// that the next open sees as ordinary sealed segments.
    func applyRetention() throws {
        let doomed: [SegmentInfo] = lock.withLock {
            guard let floor = state.consumerOffsets.values.min(), state.segments.count > 1 else { return [] }
            var result = [SegmentInfo]()
            for index in 0..<(state.segments.count - 1) where state.segments[index + 1].baseSeq <= floor {
                result.append(state.segments[index])
            }
            return result
        }
        guard !doomed.isEmpty else { return }
        try deleteSegments(doomed)
        lock.withLock { state.counters.retainedSegmentsDeleted += UInt64(doomed.count) }
        metrics.segmentsDeleted.increment(by: doomed.count)
    }

    /// Under `dropOldest`, deletes the oldest sealed segments until the batch about to be
    /// written fits under `maxBytes`, counting the records no consumer had read yet as dropped.
    /// Runs on the writer thread, outside the lock.
    func enforceCapBeforeWriting(_ batch: [PendingBlock]) {
        guard let cap = configuration.maxBytes, configuration.capPolicy == .dropOldest else { return }
        let incoming = Int64(batch.reduce(0) { $0 + $1.raw.count + Format.blockHeaderSize })
        let (doomed, lost): ([SegmentInfo], [Range<UInt64>]) = lock.withLock {
            var total = state.diskBytes + incoming
            var doomed = [SegmentInfo]()
            var lost = [Range<UInt64>]()
            let floor = state.consumerOffsets.values.min() ?? 0
            var index = 0
            while total > Int64(cap), index < state.segments.count - 1 {
                let segment = state.segments[index]
                let end = state.segments[index + 1].baseSeq
                let from = state.consumerOffsets.isEmpty ? segment.baseSeq : max(segment.baseSeq, floor)
                if from < end { lost.append(from..<end) }
                doomed.append(segment)
                total -= segment.size
                index += 1
            }
            return (doomed, lost)
        }
        guard !doomed.isEmpty else { return }
        do {
            try deleteSegments(doomed)
        } catch {
            logger.error("could not delete segments to stay under the cap", metadata: ["error": "\(error)"])
            return
        }
        let count = lost.reduce(UInt64(0)) { $0 + UInt64($1.count) }
        lock.withLock {
            state.counters.droppedRecords += count
            state.counters.droppedSegments += UInt64(doomed.count)
        }
        metrics.droppedRecords.increment(by: Int(count))
        if count > 0 {
            logger.warning("dropped the oldest records to stay under Configuration.maxBytes", metadata: [
                "records": "\(count)", "ranges": "\(lost.map { "\($0.lowerBound)..<\($0.upperBound)" })", "cap": "\(cap)",
            ])
        }
    }

    /// Unlinks sealed segments, makes the deletions durable, then forgets them.
    func deleteSegments(_ doomed: [SegmentInfo]) throws {
        for segment in doomed {
            try DirectoryIO.remove(directory + "/" + segment.name)
        }
        try DirectoryIO.sync(directory)
        let bases = Set(doomed.map(\.baseSeq))
        lock.withLock {
            let active = state.segments.last?.baseSeq
            state.segments.removeAll { bases.contains($0.baseSeq) && $0.baseSeq != active }
        }
        let (count, bytes) = lock.withLock { (state.segments.count, state.diskBytes) }
        metrics.recordSegments(count: count, diskBytes: bytes)
        try codec.dictionaries.removeUnused { lock.withLock { state.segments } }
    }
}
