import Logging
import Synchronization

/// The segments of a log that another process may be writing, as a ``RecordSource`` for a
/// ``LogFollower`` and a ``DetachedConsumer``: what was whole when ``refresh()`` last looked.
/// It owns its wake-up (inotify on Linux, polling elsewhere): ``waitForChange(past:unless:)``
/// is the one wait for the directory to change.
///
/// A refresh lists the directory (a new segment means the one before it is sealed: its file
/// size is then its data) and walks the active segment's blocks from where the last walk
/// stopped, header and payload CRC checked, up to the first position that is not a whole block
/// continuing the seqs. That position is the live tail (a block being written, zeros the
/// writer preallocated) and is never reported: the cursor reads only up to it. Damage inside
/// the active segment therefore holds a follower there until the segment is sealed (then the
/// cursor reads it as a sealed one and reports the records lost as *corrupt*), or until a
/// writing open cuts it; `verify` and snapshots report it at once.
///
/// Never reads past a whole block, never changes a file, never trusts a length before its
/// header CRC: the same bounds as every reader (FORMAT.md §6.1).
final class LiveSegments: RecordSource {
    let directory: String
    let id: LogID
    let codec: LogCodec

    private struct State {
        /// Sealed segments with their sizes, then the active one with the bytes walked so far.
        var segments: [SegmentInfo]
        /// The seq past the last whole block of the active segment.
        var end: UInt64
    }
    private let state: RankedMutex<State>
    /// One refresh at a time (taken before `state`): two at once could publish an older look
    /// after a newer one.
    private let refreshing = RankedMutex(.liveRefreshing, ())
    /// What wakes ``waitForChange(past:unless:)``: a change in the directory, ``wake()`` or ``stop()``.
    private let wakeup: Wakeup
    /// Every record below this seq is durable: this process `fdatasync`ed its segment files
    /// (a ``DetachedConsumer``'s side, ``makeDurable(upTo:level:)``), held while it syncs.
    private let syncedEnd = RankedMutex<UInt64>(.liveSynced, 0)

    /// The read-only opening it started from (it holds the codec's dictionaries and keys).
    private let snapshot: LogSnapshot

    /// Looks at the log in `directory` as a ``LogSnapshot`` does (FORMAT.md §6.1), and starts
    /// from what it found: its segments, and the active segment's whole blocks.
    /// - Throws: what ``LogSnapshot/init(directory:configuration:logger:)`` throws; `.io` if the
    ///   wake-up cannot be set up (file descriptors exhausted).
    init(directory: String, configuration: Configuration, logger: Logger) throws {
        let snapshot = try LogSnapshot(directory: directory, configuration: configuration, logger: logger)
        do {
            wakeup = try Wakeup(watching: snapshot.directory)
        } catch {
            snapshot.close()
            throw error
        }
        self.snapshot = snapshot
        self.directory = snapshot.directory
        id = snapshot.id
        codec = snapshot.codec
        state = RankedMutex(.liveState, State(segments: snapshot.segments, end: snapshot.endSeq))
    }

    deinit {
        snapshot.close()
        wakeup.release()
    }

    /// The oldest stored record, as of the last look.
    var firstSeq: UInt64 { state.withLock { $0.segments.first?.baseSeq ?? $0.end } }

    func readableSegments(durableOnly: Bool) -> (segments: [SegmentInfo], end: UInt64) {
        state.withLock { ($0.segments, $0.end) }
    }

    /// The seq past the last whole block, as of the last look (no I/O).
    var end: UInt64 { state.withLock { $0.end } }

    /// Sleeps until what is readable ends elsewhere than at `end` and returns the new end:
    /// it looks again each time the directory changes (inotify on Linux), every
    /// ``LogFollower/idleRecheck`` besides, and every ``LogFollower/pollInterval`` where inotify
    /// is missing. Nil once ``stop()`` is called or `cancelled` says so (checked at each wake-up).
    /// One waiter at a time.
    /// - Throws: what ``refresh()`` throws.
    func waitForChange(past end: UInt64, unless cancelled: () -> Bool = { false }) throws -> UInt64? {
        while !wakeup.isStopped && !cancelled() {
            // Emptied before the look: a change after it wakes the wait below.
            wakeup.drain()
            try refresh()
            let now = self.end
            if now != end { return now }
            wakeup.wait()
        }
        return nil
    }

    /// Sleeps until the next wake-up (a change, ``wake()``, ``stop()`` or the recheck interval)
    /// without looking: after a look that failed.
    func pause() { wakeup.wait() }

    /// Wakes a waiter of ``waitForChange(past:unless:)`` (to check whether it is cancelled).
    func wake() { wakeup.signal() }

    /// Ends every wait, now and later. From any thread.
    func stop() { wakeup.stop() }

    var isStopped: Bool { wakeup.isStopped }

    /// Nil: a writer that resumes past a gap starts a segment there, which reads as *missing*.
    var resumedSeq: UInt64? { nil }

    /// Looks at the directory and the active segment again.
    /// - Returns: whether anything readable changed (a segment came or went, blocks were added).
    @discardableResult
    func refresh() throws -> Bool {
        try refreshing.withLock { _ in try refreshOnce() }
    }

    private func refreshOnce() throws -> Bool {
        let listed = try DirectoryIO.list(directory).compactMap(Format.baseSeq(ofSegmentNamed:)).sorted()
        var (segments, end) = state.withLock { ($0.segments, $0.end) }
        let before = (segments, end)
        let known = Dictionary(segments.map { ($0.baseSeq, $0.size) }, uniquingKeysWith: { first, _ in first })
        let activeBase = segments.last?.baseSeq
        var fresh = [SegmentInfo]()
        for base in listed.dropLast() {
            // Sealed: its size does not change once the writer has moved on (sealing truncates
            // it to its last block before the next segment is created).
            if base != activeBase, let size = known[base] {
                fresh.append(SegmentInfo(baseSeq: base, size: size))
            } else if let size = try? FileIO.size(of: directory + "/" + Format.segmentName(base)) {
                fresh.append(SegmentInfo(baseSeq: base, size: size))
            }  // else deleted meanwhile
        }
        if let last = listed.last {
            var active = SegmentInfo(baseSeq: last, size: 0)
            var activeEnd = last
            if last == activeBase, let size = known[last] {
                active.size = size
                activeEnd = end
            }
            if let walked = try walk(active, from: activeEnd) {
                active = walked.segment
                activeEnd = walked.end
            }
            fresh.append(active)
            end = activeEnd
        }
        segments = fresh
        state.withLock {
            $0.segments = segments
            $0.end = end
        }
        return before.0 != segments || before.1 != end
    }

    /// The active segment's whole blocks past `segment.size` (0: its header not checked yet),
    /// or nil when the file is gone or its header is not whole yet.
    private func walk(_ segment: SegmentInfo, from end: UInt64) throws -> (segment: SegmentInfo, end: UInt64)? {
        let path = directory + "/" + segment.name
        let reader: SegmentReader
        do {
            // A reader of its own each time: its window must not keep bytes read while they
            // were still preallocated zeros.
            reader = try SegmentReader(path: path, baseSeq: segment.baseSeq, limit: FileIO.size(of: path))
        } catch let error as SpoolError where error.errno == .noSuchFileOrDirectory {
            return nil
        }
        var offset = segment.size
        if offset < Int64(Format.segmentHeaderSize) {
            // A header being written, or rewritten by a writing open after a crash: not yet.
            guard try reader.checkHeader(logID: id) == nil else { return nil }
            offset = Int64(Format.segmentHeaderSize)
        }
        var endSeq = end
        while offset < reader.limit, case .valid(let header) = try reader.readBlock(at: offset, keepingPayload: false),
              header.firstSeq >= endSeq {
            offset += Int64(header.totalSize)
            endSeq = header.endSeq
        }
        return (SegmentInfo(baseSeq: segment.baseSeq, size: offset), endSeq)
    }
}

/// The side of a ``DetachedConsumer``: it reads what is whole on disk, and makes records
/// durable itself by `fdatasync`ing the segment files holding them (the writer may have
/// written them without syncing; the sync of one process makes a file's data durable for all).
extension LiveSegments: ConsumedLog {
    /// Open until the consumer closes (the ``Committer`` checks that).
    func checkOpen(consumer name: String) throws {}

    /// The oldest stored record as last seen (the writer's retention may delete it before the
    /// offset file appears: the first read then reports it *dropped*).
    func registerNewConsumer(_ name: String) -> UInt64 { firstSeq }

    func forgetNewConsumer(_ name: String) {}

    func consumerOpened(_ name: String, at next: UInt64) {
        syncedEnd.withLock { $0 = next }
    }

    /// Looks at the log again (what the writer wrote since the last look), and reads on.
    func readMore() throws -> Bool {
        try refresh()
        return true
    }

    func commitBound(for end: UInt64) throws -> (end: UInt64, what: String) {
        if end > self.end { try refresh() }
        return (self.end, "written")
    }

    /// `fdatasync`s every segment file holding records below `end` not synced yet, whatever
    /// the level (a commit beside the writer is always durable).
    func makeDurable(upTo end: UInt64, level: Durability) throws {
        try syncedEnd.withLock { syncedEnd in
            guard end > syncedEnd else { return }
            let segments = readableSegments(durableOnly: false).segments
            for (index, segment) in segments.enumerated() {
                let segmentEnd = index + 1 < segments.count ? segments[index + 1].baseSeq : UInt64.max
                guard segmentEnd > syncedEnd, segment.baseSeq < end else { continue }
                do {
                    let file = try FileIO.open(directory + "/" + segment.name, .readOnly)
                    defer { file.close() }
                    try file.syncData()
                } catch let error as SpoolError where error.errno == .noSuchFileOrDirectory {
                    continue  // deleted by the writer (the cap): nothing of it to keep
                }
            }
            syncedEnd = end
        }
    }

    /// False: the writer's retention reads this committer's offset file, so it never holds
    /// an offset a power loss could take back.
    var allowsFastCommits: Bool { false }

    /// Nothing: the writer's retention reads the offset file.
    func committedDurably(_ name: String, at next: UInt64) {}

    /// Nothing: the writer's metrics count its own consumers' expired records.
    func countExpired(_ count: UInt64) {}
}
