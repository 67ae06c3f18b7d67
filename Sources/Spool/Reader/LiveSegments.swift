import Synchronization

/// The segments of a log that another process may be writing, as a ``RecordSource`` for a
/// ``LogFollower``: what was whole when ``refresh()`` last looked.
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
    private let state: Mutex<State>
    /// One refresh at a time: two at once could publish an older look after a newer one.
    private let refreshing = Mutex(())

    /// Starts from what `snapshot` found: its segments, and the active segment's whole blocks.
    init(snapshot: LogSnapshot) {
        directory = snapshot.directory
        id = snapshot.id
        codec = snapshot.codec
        state = Mutex(State(segments: snapshot.segments, end: snapshot.endSeq))
    }

    func readableSegments(durableOnly: Bool) -> (segments: [SegmentInfo], end: UInt64) {
        state.withLock { ($0.segments, $0.end) }
    }

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
            } else if let size = try? Recovery.fileSize(directory + "/" + Format.segmentName(base)) {
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
            reader = try SegmentReader(path: path, baseSeq: segment.baseSeq, limit: Recovery.fileSize(path))
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
