/// Reads a log's records in seq order from any seq, with a ``ReadNotice`` for every range it
/// cannot return (corrupt, dropped, expired, missing) instead of failing or stopping.
///
/// Sees what the writer has written when `next()` is called; returns nil at the end of what
/// is written, and can be called again later for more. Reading never blocks appends.
/// Not thread-safe: one reader per thread. Blocking file I/O: not for the cooperative pool.
public final class LogReader {
    let cursor: LogCursor

    init(cursor: LogCursor) { self.cursor = cursor }

    /// The seq of the next record to return.
    public var position: UInt64 { cursor.position }

    /// The next record or notice, or nil at the end of what is written now.
    /// - Throws: `.io` if a file cannot be read, `.unsupportedVersion` for a newer segment format.
    public func next() throws -> ReadItem? { try cursor.next() }

    /// Moves to `seq`. Finding the block that holds it reads one segment from its start,
    /// checking each block before it (header and payload CRC) but decompressing none.
    public func seek(to seq: UInt64) { cursor.seek(to: seq) }

    /// Blocks read so far, with their stored and uncompressed bytes.
    public var blocksRead: Int { cursor.blocksRead }
    /// Bytes on disk of the blocks read so far (headers included).
    public var storedBytesRead: Int { cursor.storedBytesRead }
    /// Uncompressed bytes of the blocks read so far.
    public var rawBytesRead: Int { cursor.rawBytesRead }
}

extension EventLog: RecordSource {
    func readableSegments(durableOnly: Bool) -> (segments: [SegmentInfo], end: UInt64) {
        lock.withLock { (state.table.segments, durableOnly ? state.syncedEnd : state.writtenEnd) }
    }

    /// Nil: opening raised the next seq by starting a new segment there (FORMAT.md §6 step 5).
    var resumedSeq: UInt64? { nil }

    /// False: retention forgets a segment (under the lock) before it unlinks it.
    func wasDeletedByWriter(_ segment: SegmentInfo) -> Bool { false }

    /// A reader positioned at `seq` (the oldest stored record if nil).
    public func reader(from seq: UInt64? = nil) -> LogReader {
        LogReader(cursor: LogCursor(log: self, from: seq ?? firstSeq))
    }

    /// Every record from `seq` to the end of what is written now, with the notices met on the way.
    /// Blocking; meant for tools and tests (a consumer reads in bounded batches).
    public func readAll(from seq: UInt64? = nil) throws -> [ReadItem] {
        try reader(from: seq).readToEnd()
    }
}

extension LogReader {
    /// Every item from the position to the end of what is readable now.
    func readToEnd() throws -> [ReadItem] {
        var items = [ReadItem]()
        while let item = try next() { items.append(item) }
        return items
    }
}
