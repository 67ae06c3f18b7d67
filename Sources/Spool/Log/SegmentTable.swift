/// A segment file of the log, as the log's shared state knows it.
struct SegmentInfo: Sendable, Equatable {
    /// The seq of the segment's first record (its name).
    var baseSeq: UInt64
    /// Bytes of the file that hold valid data (for the active segment: what the writer has written).
    var size: Int64
    var name: String { Format.segmentName(baseSeq) }
}

/// The cold rewrite of one sealed segment in flight (``SegmentTable/rewrite``).
struct SegmentRewrite {
    /// The base seq of the segment being rewritten.
    let baseSeq: UInt64
    /// The bytes its temporary file takes, counted against the cap before they are written.
    var written: Int64
    /// Raised once the rewrite must stop; its compression polls it without the log's lock.
    let stop: StopFlag
}

/// The log's segment files and what decides their fate: the list (sealed segments, then the
/// active one), every consumer's committed offset (the retention floor), the retention runs
/// queued and in flight, the cold rewrite in flight (its reservation under the cap), and the
/// active segment's size while a write the cap made room for is in flight.
///
/// Part of ``LogState``, guarded by `EventLog.lock`: its fields are read freely and written
/// only by its own operations. It knows nothing of the log's lifecycle: ``LogState`` says
/// whether the files may be touched (`allowed`). Pure: no I/O, no clock, no lock of its own.
struct SegmentTable {
    /// Sealed segments then the active one (last), by base seq.
    private(set) var segments: [SegmentInfo] {
        didSet { diskBytes = Self.bytes(of: segments) }
    }
    /// Bytes of every segment file (valid part), kept with the list: the append path's cap
    /// check (`rejectNew`) reads it under the log's lock for every record, and the list changes
    /// only as writes, rolls, retention and rewrites go.
    private(set) var diskBytes: Int64
    /// The committed offset (next seq to deliver) of every consumer, by name.
    private(set) var consumerOffsets: [String: UInt64] = [:]
    /// Commits' retention deleting segments right now (see `EventLog.applyRetention`):
    /// `close()` waits for them before it releases the directory lock.
    private(set) var retentionsInFlight = 0
    /// A retention run is queued on the retention queue and has not started.
    private(set) var retentionQueued = false
    /// The sealed segment cold recompression is rewriting, if any (one at a time): the bytes
    /// its temporary file takes (`written`, counted before they are written) count against the
    /// cap, and `close()` and `suspend()` wait for it to end. `stop` is raised once the cap or
    /// retention took that segment, a write or an append needed the room, or the files are let
    /// go or the log failed: the rewrite then ends without replacing anything, and its
    /// compression, which polls the flag without the lock, stops within a step.
    private(set) var rewrite: SegmentRewrite? = nil
    /// The active segment's size once the write the cap just made room for is done (the
    /// writer's `enforceCapBeforeWriting`), until that write is published: a cold rewrite
    /// making room meanwhile counts the active segment at this size, not the listed one.
    private(set) var activeSizeBeingWritten: Int64? = nil

    /// A table listing `segments` (sealed ones, then the active one), with no consumer, no
    /// retention run and no rewrite.
    init(segments: [SegmentInfo]) {
        self.segments = segments
        self.diskBytes = Self.bytes(of: segments)
    }

    private static func bytes(of segments: [SegmentInfo]) -> Int64 { segments.reduce(0) { $0 + $1.size } }

    // MARK: The list

    /// Records a segment's current size, adding it if it is new (by base seq).
    mutating func noteSegment(_ segment: SegmentInfo) {
        if let index = segments.lastIndex(where: { $0.baseSeq == segment.baseSeq }) {
            segments[index].size = segment.size
        } else {
            segments.append(segment)
        }
    }

    /// Takes the sealed segments among `doomed` out of the list (never the active one), before
    /// they are unlinked: a reader that finds a listed file missing then knows it was removed
    /// outside Spool. A rewrite of one of them is cancelled (it must not put the file back).
    /// Returns those taken out.
    mutating func forgetSegments(_ doomed: [SegmentInfo]) -> [SegmentInfo] {
        let active = segments.last?.baseSeq
        let bases = Set(doomed.map(\.baseSeq))
        let forgotten = segments.filter { bases.contains($0.baseSeq) && $0.baseSeq != active }
        segments.removeAll { bases.contains($0.baseSeq) && $0.baseSeq != active }
        if let rewrite, forgotten.contains(where: { $0.baseSeq == rewrite.baseSeq }) { cancelRewrite() }
        return forgotten
    }

    /// Lists again, in seq order, segments ``forgetSegments(_:)`` took out that could not be unlinked.
    mutating func relistSegments(_ kept: [SegmentInfo]) {
        for segment in kept {
            let index = segments.firstIndex { $0.baseSeq > segment.baseSeq } ?? segments.endIndex
            segments.insert(segment, at: index)
        }
    }

    // MARK: Consumers and retention

    /// Records consumer `name`'s offset (next seq to deliver): made at it, a durable commit, or
    /// one read from its file.
    mutating func recordOffset(of name: String, at next: UInt64) {
        consumerOffsets[name] = next
    }

    /// Forgets a consumer whose offset file could not be made.
    mutating func forgetConsumer(_ name: String) {
        consumerOffsets.removeValue(forKey: name)
    }

    /// What retention keeps: every record at or past the lowest committed offset.
    var retention: Retention { Retention(floor: consumerOffsets.values.min()) }

    /// Whether to queue a retention run (`allowed`: the files are held): at most one is queued.
    mutating func queueRetention(allowed: Bool) -> Bool {
        guard !retentionQueued, allowed else { return false }
        retentionQueued = true
        return true
    }

    /// The queued retention run starts.
    mutating func retentionDequeued() { retentionQueued = false }

    /// Starts a retention run when `allowed` (the files are held): the sealed segments every
    /// consumer has passed, counted in flight until ``finishRetention()`` when any.
    mutating func beginRetention(allowed: Bool) -> [SegmentInfo] {
        guard allowed else { return [] }
        let doomed = retention.passedSegments(of: segments)
        if !doomed.isEmpty { retentionsInFlight += 1 }
        return doomed
    }

    /// A retention run that ``beginRetention(allowed:)`` started (with segments) ended.
    mutating func finishRetention() {
        assert(retentionsInFlight > 0, "only a retention run that began ends")
        retentionsInFlight -= 1
    }

    // MARK: Cold rewrite and the cap

    /// Starts rewriting the sealed segment at `segment.baseSeq` when `allowed`: the segment as
    /// listed and the flag raised when the rewrite must stop; nil when another rewrite runs, or
    /// the segment is not a listed sealed one of that size (retention or the cap took it).
    mutating func beginRewrite(of segment: SegmentInfo, allowed: Bool) -> (segment: SegmentInfo, stop: StopFlag)? {
        guard rewrite == nil, allowed,
              let index = segments.firstIndex(where: { $0.baseSeq == segment.baseSeq }),
              index < segments.count - 1, segments[index].size == segment.size else { return nil }
        let stop = StopFlag()
        rewrite = SegmentRewrite(baseSeq: segment.baseSeq, written: 0, stop: stop)
        return (segments[index], stop)
    }

    /// A rewrite is in flight and was not stopped.
    var rewriteUnstopped: Bool {
        guard let rewrite else { return false }
        return !rewrite.stop.isRaised
    }

    /// The bytes the cap counts for the rewrite in flight (0 when none, or cancelled).
    var rewriteReservation: Int64 {
        guard let rewrite, !rewrite.stop.isRaised else { return 0 }
        return rewrite.written
    }

    /// The rewrite's temporary file is about to hold `bytes` (the cap made room for them).
    mutating func noteRewriteWritten(_ bytes: Int64) {
        rewrite?.written = bytes
    }

    /// The rewrite must stop: it replaces nothing and its reservation no longer counts.
    mutating func cancelRewrite() {
        rewrite?.stop.raise()
    }

    /// Ends the rewrite in flight. With `replacedBy`, the new file took the segment's name: the
    /// list takes its size. Returns the bytes saved when a listed segment was replaced.
    mutating func finishRewrite(replacedBy size: Int64?) -> Int64? {
        defer { self.rewrite = nil }
        guard let rewrite, let size, let index = segments.firstIndex(where: { $0.baseSeq == rewrite.baseSeq }) else { return nil }
        let saved = max(0, segments[index].size - size)
        segments[index].size = size
        return saved
    }

    /// The writer made room under the cap for a write that leaves the active segment at `size`.
    mutating func noteActiveSizeBeingWritten(_ size: Int64) {
        activeSizeBeingWritten = size
    }

    /// The writer's write was published (its size is in the list, or it failed).
    mutating func activeWriteFinished() {
        activeSizeBeingWritten = nil
    }

    /// What the cap counts: the segments, the active one at `activeSizeAfter` (the writer's
    /// write about to be made) or else at the size a write in flight leaves it, and a cold
    /// rewrite's file at `rewriteBytes` (the rewrite asking for room) or else as far as it got.
    func bytesUnderCap(activeSizeAfter: Int64? = nil, rewriteBytes: Int64? = nil) -> Int64 {
        let listedActive = segments.last?.size ?? 0
        let active = activeSizeAfter ?? max(listedActive, activeSizeBeingWritten ?? 0)
        return diskBytes - listedActive + active + (rewriteBytes ?? rewriteReservation)
    }
}
