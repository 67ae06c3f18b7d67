/// Where a ``LogCursor`` reads: a log's files and what of them is readable now.
protocol RecordSource: AnyObject, Sendable {
    /// The directory holding the segment files.
    var directory: String { get }
    /// The identity every segment header must carry.
    var id: LogID { get }
    /// Dictionaries and keys for decoding blocks.
    var codec: LogCodec { get }
    /// The segments (oldest first, the last one's size its readable bytes) and the seq where
    /// reading stops: the end of what is written, or of what is durable with `durableOnly`.
    func readableSegments(durableOnly: Bool) -> (segments: [SegmentInfo], end: UInt64)
    /// Where seqs resume past the stored records when a power loss took back records a consumer
    /// had passed and no segment starts there (FORMAT.md §1): readers end with the gap as
    /// *missing*. Nil when there is no such gap, or when a writing open already started a
    /// segment at the resumed seq (the gap then reads between segments).
    var resumedSeq: UInt64? { get }
    /// Whether `segment`, listed and now gone, was deleted by a writer (retention or the cap)
    /// while this source was read, rather than removed outside Spool.
    func wasDeletedByWriter(_ segment: SegmentInfo) -> Bool
}

extension RecordSource {
    /// Readers of files a writer may change under them (snapshots, followers): `segment` is
    /// gone with every segment before it, or the directory cannot say. Writers delete oldest
    /// first, never from the middle (even one that opened after the reader looked and closed
    /// since); a segment gone while an older one remains was removed outside Spool.
    func wasDeletedByWriter(_ segment: SegmentInfo) -> Bool {
        guard let names = try? DirectoryIO.list(directory) else { return true }
        return !names.contains { Format.baseSeq(ofSegmentNamed: $0).map { $0 < segment.baseSeq } ?? false }
    }
}

/// Reads records in seq order across segments, from any seq, verifying every block's checksum
/// before decompressing it, and reporting every range it cannot return as a ``ReadNotice``.
///
/// It reads only what its source publishes: an ``EventLog``'s written records (up to
/// `writtenEnd`, or `syncedEnd` for a cursor that reads only durable records), taken
/// under the log's lock only for an instant, so reading never blocks appends; or a
/// ``LogSnapshot``'s fixed segments. Not thread-safe: one owner.
final class LogCursor {
    private let log: any RecordSource
    /// The next seq to return.
    private(set) var position: UInt64
    private var segment: SegmentReader?

    /// Closes the segment file it reads: for a closed consumer's cursor, which reads no more.
    func releaseFiles() { segment = nil }
    /// Offset of the next block to read in `segment`.
    private var offset: Int64 = 0
    /// Holds the last decoded block and hands out its records one at a time. Internal for tests.
    let decoder: BlockDecoder
    /// Figures for `verify`.
    private(set) var blocksRead = 0
    private(set) var storedBytesRead = 0
    private(set) var rawBytesRead = 0
    /// Whether the cursor stops at `syncedEnd` instead of `writtenEnd`.
    private let durableOnly: Bool
    /// Where the segment of the decoded block ends (the next segment's base seq; no end for the
    /// active segment): a sealed segment's records at or past it are the next segment's
    /// (FORMAT.md §2), even within a block that straddles it.
    private var decodedLimit = UInt64.max

    init(log: any RecordSource, from seq: UInt64, durableOnly: Bool = false) {
        self.log = log
        self.position = seq
        self.durableOnly = durableOnly
        self.decoder = BlockDecoder(codec: log.codec)
    }

    /// Moves to `seq`, reusing the decoded block when it holds `seq`.
    func seek(to seq: UInt64) {
        if let header = decoder.header, seq >= header.firstSeq, seq < header.endSeq {
            decoder.seek(to: seq)
            position = seq
            return
        }
        decoder.discard()
        if let segment, seq < position || seq < segment.baseSeq { self.segment = nil }
        position = seq
    }

    /// The next record or notice, or nil when everything written so far has been read.
    func next() throws -> ReadItem? {
        if let item = try nextStored() { return item }
        guard let resumed = log.resumedSeq, position < resumed else { return nil }
        return .notice(skip(to: resumed, kind: .missing,
                            detail: "lost after a consumer had passed them (a power loss took back written records); seqs resume at \(resumed)"))
    }

    /// The next stored record or notice, or nil at the end of what is stored.
    private func nextStored() throws -> ReadItem? {
        while true {
            if decoder.header != nil {
                decoder.seek(to: position)  // past the records before a reader that started inside the block
                if let record = decoder.next(), record.seq < decodedLimit {
                    position = record.seq + 1
                    return .record(record)
                }
                decoder.discard()
            }
            let (segments, written) = log.readableSegments(durableOnly: durableOnly)
            guard position < written else { return nil }
            guard let first = segments.first else { return nil }
            if position < first.baseSeq {
                let notice = ReadNotice(kind: .dropped, range: position..<first.baseSeq,
                                        detail: "deleted before this reader got to them (the cap, or retention past every consumer)")
                position = first.baseSeq
                segment = nil
                return .notice(notice)
            }
            // The segment holding `position`: the last one whose base is at or below it.
            guard let index = segments.lastIndex(where: { $0.baseSeq <= position }) else { return nil }
            let info = segments[index]
            let isActive = index == segments.count - 1
            let segmentEnd = isActive ? written : segments[index + 1].baseSeq
            if segment?.baseSeq != info.baseSeq {
                segment = nil
                do {
                    let reader = try SegmentReader(path: log.directory + "/" + info.name, baseSeq: info.baseSeq, limit: info.size)
                    if let problem = try reader.checkHeader(logID: log.id) {
                        return .notice(skip(to: segmentEnd, kind: .corrupt, detail: "\(info.name): \(problem)"))
                    }
                    segment = reader
                    offset = Int64(Format.segmentHeaderSize)
                } catch let error as SpoolError where error.errno == .noSuchFileOrDirectory {
                    // Retention and the cap forget a segment before they unlink it: one the next
                    // snapshot no longer lists was deleted meanwhile. One still listed was removed
                    // outside Spool: its records are missing (looking again would never end).
                    let segments = log.readableSegments(durableOnly: durableOnly).segments
                    guard segments.contains(where: { $0.baseSeq == info.baseSeq }) else { continue }
                    if log.wasDeletedByWriter(info) {
                        return .notice(skip(to: segmentEnd, kind: .dropped,
                                            detail: "\(info.name) was deleted by the writer (retention or the cap) while this snapshot read"))
                    }
                    return .notice(skip(to: segmentEnd, kind: .missing, detail: "\(info.name) is gone (removed outside Spool)"))
                }
            }
            guard let reader = segment else { continue }
            // A sealed segment ends where the file this reader opened ends: a cold rewrite may
            // have replaced the listed file (whose size the list now has) since it was opened,
            // and this reader goes on reading the copy it holds, record for record the same.
            reader.limit = isActive ? info.size : try reader.sealedSize()
            if offset >= reader.limit {
                if isActive { return nil }
                // A sealed segment's blocks all checked but end before the next segment's base:
                // no damaged bytes, so the rest is missing (seqs skipped after a power loss).
                if position < segmentEnd {
                    return .notice(skip(to: segmentEnd, kind: .missing, detail: "\(info.name) ends at offset \(offset) before record \(segmentEnd - 1)"))
                }
                segment = nil
                continue
            }
            let read = try reader.readBlock(at: offset)
            guard case .valid(let header) = read else {
                let reason: String
                if case .corrupt(let why) = read { reason = why } else { reason = "the block at offset \(offset) is cut short" }
                // The next valid block holding a record from `position` on: one that ends at or
                // before it (a stale copy of an earlier block after the damage, or a block a
                // reader that started inside the segment has not reached) is passed over, so
                // the records the damaged bytes held read as corrupt, never as missing.
                if let next = try resync(reader, after: offset) {
                    let notice = skip(to: min(next.header.firstSeq, segmentEnd), kind: .corrupt, detail: "\(info.name): \(reason); resumed at offset \(next.offset)")
                    offset = next.offset
                    if notice.range.isEmpty { continue }
                    return .notice(notice)
                }
                if isActive { return nil }
                if position >= segmentEnd {
                    // Every record of the segment was read: what follows its last block holds none.
                    segment = nil
                    continue
                }
                return .notice(skip(to: segmentEnd, kind: .corrupt, detail: "\(info.name): \(reason); no valid block follows"))
            }
            if header.endSeq <= position {  // seeking: skip the block unread
                offset += Int64(header.totalSize)
                continue
            }
            if header.firstSeq > position {
                return .notice(skip(to: min(header.firstSeq, segmentEnd), kind: .missing, detail: "\(info.name): no block holds these records"))
            }
            // Throws for a missing dictionary or key, staying on this block (see BlockDecoder).
            switch try decoder.decode(header, payload: reader.payload, timestampBase: reader.timestampBase(for: header),
                                      location: "\(info.name) offset \(offset)") {
            case .valid:
                break
            case .corrupt(let why):
                let notice = skip(to: min(header.endSeq, segmentEnd), kind: .corrupt, detail: why)
                offset += Int64(header.totalSize)
                return .notice(notice)
            }
            offset += Int64(header.totalSize)
            decodedLimit = isActive ? .max : segmentEnd
            blocksRead += 1
            storedBytesRead += header.totalSize
            rawBytesRead += Int(header.rawLength)
        }
    }

    /// ``SegmentReader/resync(after:)``, where a search that gave up (forged headers) counts as
    /// finding no valid block: the rest of the segment is reported, and reading goes on.
    private func resync(_ reader: SegmentReader, after offset: Int64) throws -> (offset: Int64, header: BlockHeader)? {
        do {
            return try reader.resync(after: offset, wanted: { [position] in $0.endSeq > position })
        } catch let error as SpoolError where error.code == .corrupt {
            return nil
        }
    }

    /// Moves past `position..<end` and returns the notice for it.
    private func skip(to end: UInt64, kind: ReadNotice.Kind, detail: String) -> ReadNotice {
        let range = position..<max(position, end)
        position = range.upperBound
        decoder.discard()
        return ReadNotice(kind: kind, range: range, detail: detail)
    }
}
