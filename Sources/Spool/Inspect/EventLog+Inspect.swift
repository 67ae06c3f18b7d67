/// One segment file as `summary()` sees it from its block headers.
public struct SegmentSummary: Sendable, Equatable {
    public var name: String
    public var baseSeq: UInt64
    public var bytes: Int64
    public var blocks: Int
    public var records: UInt64
    /// Uncompressed bytes of the blocks' records areas.
    public var rawBytes: Int64
}

/// The whole log from its block headers (no payload is read): what `spool stat` prints.
public struct LogSummary: Sendable, Equatable {
    public var id: LogID
    public var segments: [SegmentSummary]
    public var firstSeq: UInt64
    public var nextSeq: UInt64
    public var diskBytes: Int64 { segments.reduce(0) { $0 + $1.bytes } }
    public var records: UInt64 { segments.reduce(0) { $0 + $1.records } }
    public var rawBytes: Int64 { segments.reduce(0) { $0 + $1.rawBytes } }
    /// Uncompressed bytes per byte on disk.
    public var compressionRatio: Double { diskBytes == 0 ? 0 : Double(rawBytes) / Double(diskBytes) }
}

/// Everything `verify()` checked: every block's checksums, decompression and records.
public struct VerifyReport: Sendable, Equatable {
    public var segments: Int
    public var blocks: Int
    public var records: UInt64
    public var diskBytes: Int64
    public var rawBytes: Int64
    /// Ranges that could not be read because stored bytes were damaged.
    public var corrupt: [ReadNotice]
    /// Other ranges not returned (dropped by the cap, missing after a power loss).
    public var otherNotices: [ReadNotice]
    /// What opening found and repaired (a torn tail is reported here, not as corruption).
    public var recovery: RecoveryReport
    public var compressionRatio: Double { diskBytes == 0 ? 0 : Double(rawBytes) / Double(diskBytes) }
    /// Whether no stored byte was found damaged.
    public var isClean: Bool { corrupt.isEmpty }
}

extension EventLog {
    /// Reads every block header of every segment (no payloads): counts, sizes, ratio.
    /// Blocking file I/O; the cost grows with the number of blocks.
    public func summary() throws -> LogSummary {
        let (segments, first, next) = lock.withLock { (state.segments, state.firstSeq, state.nextSeq) }
        var summaries = [SegmentSummary]()
        for segment in segments {
            var summary = SegmentSummary(name: segment.name, baseSeq: segment.baseSeq, bytes: segment.size, blocks: 0, records: 0, rawBytes: 0)
            if let reader = try? SegmentReader(path: directory + "/" + segment.name, baseSeq: segment.baseSeq, limit: segment.size) {
                var offset = Int64(Format.segmentHeaderSize)
                while offset + Int64(Format.blockHeaderSize) <= segment.size {
                    let bytes = try reader.file.read(count: Format.blockHeaderSize, at: offset)
                    guard case .success(let header) = bytes.withUnsafeBytes({ BlockHeader.parse($0) }) else { break }
                    summary.blocks += 1
                    summary.records += UInt64(header.recordCount)
                    summary.rawBytes += Int64(header.rawLength)
                    offset += Int64(header.totalSize)
                }
            }
            summaries.append(summary)
        }
        return LogSummary(id: id, segments: summaries, firstSeq: first, nextSeq: next)
    }

    /// Reads and checks every stored block: both checksums, decompression, every record's framing.
    /// Blocking file I/O over the whole log.
    public func verify() throws -> VerifyReport {
        try syncBlocking()
        let reader = reader(from: firstSeq)
        var corrupt = [ReadNotice]()
        var other = [ReadNotice]()
        var records: UInt64 = 0
        while let item = try reader.next() {
            switch item {
            case .record: records += 1
            case .notice(let notice) where notice.kind == .corrupt: corrupt.append(notice)
            case .notice(let notice): other.append(notice)
            }
        }
        let (count, disk) = lock.withLock { (state.segments.count, state.diskBytes) }
        return VerifyReport(segments: count, blocks: reader.blocksRead, records: records, diskBytes: disk,
                            rawBytes: Int64(reader.rawBytesRead), corrupt: corrupt, otherNotices: other, recovery: recoveryReport)
    }
}
