/// One segment file as `summary()` sees it from its block headers.
public struct SegmentSummary: Sendable, Equatable {
    /// The file name (`%020llu.seg`).
    public var name: String
    /// The seq of its first record.
    public var baseSeq: UInt64
    /// Its valid bytes on disk.
    public var bytes: Int64
    /// Blocks whose headers check.
    public var blocks: Int
    /// Records those blocks hold.
    public var records: UInt64
    /// Uncompressed bytes of the blocks' records areas.
    public var rawBytes: Int64
}

/// The whole log from its block headers (no payload is read): what `spool stat` prints.
public struct LogSummary: Sendable, Equatable {
    /// The log's identity.
    public var id: LogID
    /// Every segment, oldest first.
    public var segments: [SegmentSummary]
    /// The seq of the oldest stored record.
    public var firstSeq: UInt64
    /// The seq the next append gets.
    public var nextSeq: UInt64
    /// Bytes of every segment.
    public var diskBytes: Int64 { segments.reduce(0) { $0 + $1.bytes } }
    /// Records in every segment.
    public var records: UInt64 { segments.reduce(0) { $0 + $1.records } }
    /// Uncompressed bytes of every block's records area.
    public var rawBytes: Int64 { segments.reduce(0) { $0 + $1.rawBytes } }
    /// Uncompressed bytes per byte on disk.
    public var compressionRatio: Double { diskBytes == 0 ? 0 : Double(rawBytes) / Double(diskBytes) }
}

/// Everything `verify()` checked: every block's checksums, decompression and records.
public struct VerifyReport: Sendable, Equatable {
    /// Segment files checked.
    public var segments: Int
    /// Blocks read and verified.
    public var blocks: Int
    /// Records read.
    public var records: UInt64
    /// Bytes of every segment on disk.
    public var diskBytes: Int64
    /// Uncompressed bytes of the blocks read.
    public var rawBytes: Int64
    /// Ranges that could not be read because stored bytes were damaged.
    public var corrupt: [ReadNotice]
    /// Other ranges not returned (dropped by the cap, missing after a power loss).
    public var otherNotices: [ReadNotice]
    /// What opening found and repaired, or for a snapshot only found (a torn tail is reported
    /// here, not as corruption).
    public var recovery: RecoveryReport
    /// Uncompressed bytes per byte on disk.
    public var compressionRatio: Double { diskBytes == 0 ? 0 : Double(rawBytes) / Double(diskBytes) }
    /// Whether no stored byte was found damaged and every segment file fits the log's sequence.
    public var isClean: Bool { corrupt.isEmpty && recovery.setAsideSegments.isEmpty }
}

extension EventLog {
    /// Reads every block header of every segment (no payloads): counts, sizes, ratio.
    /// Blocking file I/O; the cost grows with the number of blocks.
    public func summary() throws -> LogSummary {
        // One acquisition: retention or a roll between two would leave seqs and segments disagreeing.
        let (first, next, segments) = lock.withLock { (state.firstSeq, state.nextSeq, state.table.segments) }
        return try summarize(firstSeq: first, nextSeq: next, segments: segments)
    }

    /// Reads and checks every stored block: both checksums, decompression, every record's framing.
    /// Writes pending records first, so they are checked too. Blocking file I/O over the whole log.
    public func verify() throws -> VerifyReport {
        try syncBlocking()
        return try verifyAll(from: firstSeq, recovery: recoveryReport)
    }
}

extension RecordSource {
    /// What ``EventLog/summary()`` and ``LogSnapshot/summary()`` return, from `segments` and the
    /// seqs read with them.
    func summarize(firstSeq: UInt64, nextSeq: UInt64, segments: [SegmentInfo]) throws -> LogSummary {
        var summaries = [SegmentSummary]()
        for segment in segments {
            var summary = SegmentSummary(name: segment.name, baseSeq: segment.baseSeq, bytes: segment.size, blocks: 0, records: 0, rawBytes: 0)
            if let reader = try? SegmentReader(path: directory + "/" + segment.name, baseSeq: segment.baseSeq, limit: segment.size) {
                var offset = Int64(Format.segmentHeaderSize)
                while let header = try reader.readHeader(at: offset) {
                    summary.blocks += 1
                    summary.records += UInt64(header.recordCount)
                    summary.rawBytes += Int64(header.rawLength)
                    offset += Int64(header.totalSize)
                }
            }
            summaries.append(summary)
        }
        return LogSummary(id: id, segments: summaries, firstSeq: firstSeq, nextSeq: nextSeq)
    }

    /// What ``EventLog/verify()`` and ``LogSnapshot/verify()`` return: every record from `firstSeq` read.
    /// `progress`, if given, is called with the seq reached each time a new block is read.
    func verifyAll(from firstSeq: UInt64, recovery: RecoveryReport, progress: ((UInt64) -> Void)? = nil) throws -> VerifyReport {
        let cursor = LogCursor(log: self, from: firstSeq)
        var corrupt = [ReadNotice]()
        var other = [ReadNotice]()
        var records: UInt64 = 0
        var blocks = 0
        while let item = try cursor.next() {
            switch item {
            case .record(let record):
                records += 1
                if let progress, cursor.blocksRead != blocks {
                    blocks = cursor.blocksRead
                    progress(record.seq)
                }
            case .notice(let notice) where notice.kind == .corrupt: corrupt.append(notice)
            case .notice(let notice): other.append(notice)
            }
        }
        let segments = readableSegments(durableOnly: false).segments
        return VerifyReport(segments: segments.count, blocks: cursor.blocksRead, records: records,
                            diskBytes: segments.reduce(0) { $0 + $1.size }, rawBytes: Int64(cursor.rawBytesRead),
                            corrupt: corrupt, otherNotices: other, recovery: recovery)
    }
}
