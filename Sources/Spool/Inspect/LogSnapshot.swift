import Logging

/// A read-only view of a log, for tools that look without changing anything (`spool verify`,
/// `spool stat`, `spool dump`) and for checking what a crash left before anything repairs it.
///
/// Opening applies recovery's rules to find what a writing ``EventLog/open(directory:configuration:logger:metricsFactory:)``
/// would repair (a torn tail, damage inside the active segment, leftover temporary files,
/// unreadable offset files) and reports it in ``recoveryReport`` with `repaired` false, without
/// touching a file: reading stops where a writing open would cut. A snapshot creates, writes,
/// syncs and deletes nothing.
///
/// It takes no lock: a snapshot opens beside an `EventLog` that is writing the log (in this
/// process or another), and an `EventLog` opens beside any number of snapshots. When a writer
/// has the log open (``isLive``), the snapshot is of what was written when it was taken: the
/// bytes after the last complete block of the active segment (a block being written, zeros
/// preallocated ahead of the writer) are not written yet, not a torn tail, and are not
/// reported; damage before them is found and reported as always. A segment that retention or
/// the cap deletes while a snapshot reads it ends with a *dropped* notice for its records
/// (FORMAT.md §6.1 says what a reader of a live log may rely on).
///
/// Thread-safety: `Sendable`; each ``LogReader`` it makes has one owner. Every method does
/// blocking file I/O: not for Swift's cooperative pool.
public final class LogSnapshot: Sendable {
    /// The directory holding the log's files.
    public let directory: String
    /// The log's identity.
    public let id: LogID
    /// What opening found; nothing of it was repaired.
    public let recoveryReport: RecoveryReport
    /// Each consumer's committed offset, by name (an unreadable offset file reads as
    /// ``firstSeq``, where the next writing open resets it).
    public let consumerOffsets: [String: UInt64]
    /// The seq of the oldest stored record.
    public var firstSeq: UInt64 { segments.first?.baseSeq ?? endSeq }
    /// One past the last readable record.
    public let endSeq: UInt64
    /// The seq the next append would get: ``endSeq``, or past it when a consumer's offset is
    /// (seqs are never reused, even ones a power loss took back). Readers end with the seqs
    /// between them as *missing*, as they would after a writing open.
    /// Beside a writer (``isLive``) it is ``endSeq``: a consumer's offset past it is progress
    /// made after the snapshot read the segments, not seqs lost.
    public var nextSeq: UInt64 { isLive ? endSeq : max(endSeq, consumerOffsets.values.max() ?? 0) }

    /// Whether a writer had the log open when the snapshot was taken.
    public let isLive: Bool

    /// Whether a writer (an ``EventLog``, in any process) has the log in `directory` open now:
    /// a shared `flock` on its `LOCK` file, tried and released at once. Creates nothing.
    public static func writerIsLive(directory: String) -> Bool { DirectoryLock.writerIsLive(directory: directory) }

    let codec: LogCodec
    let segments: [SegmentInfo]

    /// Opens a snapshot of the log in `directory`.
    /// - Parameters:
    ///   - directory: the log's directory; it must hold a log (a snapshot creates none).
    ///   - configuration: only its `encryption` keys are used, to read encrypted blocks.
    ///   - logger: where the snapshot logs what recovery would repair, never payloads.
    /// - Throws: ``SpoolError`` `.invalidArgument` if `directory` holds no log; `.corrupt` if no file names the log's identity or the active
    ///   segment's header is damaged while it holds valid blocks; `.authenticationFailed` for a
    ///   key that does not match its check file; `.io` for system errors.
    public init(directory: String, configuration: Configuration = Configuration(), logger: Logger = Logger(label: "spool")) throws {
        try configuration.validate()
        guard DirectoryIO.exists(directory) else {
            throw SpoolError(.invalidArgument, "no such directory", path: directory)
        }
        // Checked before the lock, whose file must not appear in a directory that holds no log.
        let names = try DirectoryIO.list(directory)
        guard names.contains(Format.metaFileName) || names.contains(where: { Format.baseSeq(ofSegmentNamed: $0) != nil }) else {
            throw SpoolError(.invalidArgument, "not a Spool log (no META file and no segment)", path: directory)
        }
        // Looked at before the files: a writer that opens after this look finds the files as
        // recovery left them, and this snapshot reads what was there (older, never wrong).
        var live = DirectoryLock.writerIsLive(directory: directory)
        var recovered = try Self.recover(directory: directory, configuration: configuration, live: live, logger: logger)
        // A writer that opened while the files were read may have begun a block: looked at
        // again, so its first write is not reported as a torn tail.
        if !live { live = DirectoryLock.writerIsLive(directory: directory) }
        isLive = live
        if live {
            // The writer's own: the tail of the active segment (a block it is writing, zeros it
            // preallocated) and the temporary file of an offset it is committing. Not damage.
            recovered.report.tornTail = nil
            recovered.report.preallocatedBytesCut = 0
            recovered.report.removedTemporaryFiles = []
        }
        codec = try LogCodec(directory: directory, configuration: configuration, logID: recovered.meta.logID,
                             inheritedThrough: recovered.segments.last?.baseSeq, readOnly: true, logger: logger)
        self.directory = directory
        id = recovered.meta.logID
        recoveryReport = recovered.report
        consumerOffsets = recovered.consumerOffsets
        segments = recovered.segments
        endSeq = recovered.endSeq
    }

    /// Recovery's rules without repairs. Beside a writer, a segment that retention deletes
    /// between the listing and its reading is met as a missing file: the directory is read
    /// again (a few times; retention does not delete faster than that).
    private static func recover(directory: String, configuration: Configuration, live: Bool, logger: Logger) throws -> RecoveredLog {
        var attempt = 0
        while true {
            do {
                return try Recovery.recover(directory: directory, configuration: configuration, repairing: false, logger: logger)
            } catch let error as SpoolError where live && error.errno == .noSuchFileOrDirectory && attempt < 5 {
                attempt += 1
            }
        }
    }

    /// Releases what the snapshot holds (dictionaries and keys). Readers made from the
    /// snapshot must not be used after it. Closing twice is harmless.
    public func close() {
        codec.close()
    }

    /// The names of the consumers that have an offset file.
    public var consumerNames: [String] { consumerOffsets.keys.sorted() }

    /// What consumer `name` has not committed yet, or nil if the log has no such consumer.
    public func lag(ofConsumer name: String) -> ConsumerLag? {
        consumerOffsets[name].map { ConsumerLag(from: $0, nextSeq: nextSeq, segments: segments, pendingBytes: 0) }
    }

    /// A reader positioned at `seq` (the oldest stored record if nil).
    public func reader(from seq: UInt64? = nil) -> LogReader {
        LogReader(cursor: LogCursor(log: self, from: seq ?? firstSeq))
    }

    /// Every record from `seq` to the end, with the notices met on the way.
    public func readAll(from seq: UInt64? = nil) throws -> [ReadItem] {
        try reader(from: seq).readToEnd()
    }

    /// Every block header of every segment (no payloads): counts, sizes, ratio.
    public func summary() throws -> LogSummary {
        try summarize(firstSeq: firstSeq, nextSeq: nextSeq, segments: segments)
    }

    /// Every stored block checked: both checksums, decompression, every record's framing.
    ///
    /// - Parameter progress: called on this thread after each block read, with the seq the
    ///   check has reached (records from ``firstSeq`` up to it are checked; it ends at
    ///   ``endSeq``), for a progress display. It must return quickly.
    public func verify(progress: ((_ checkedThrough: UInt64) -> Void)? = nil) throws -> VerifyReport {
        try verifyAll(from: firstSeq, recovery: recoveryReport, progress: progress)
    }
}

extension LogSnapshot: RecordSource {
    func readableSegments(durableOnly: Bool) -> (segments: [SegmentInfo], end: UInt64) {
        (segments, endSeq)
    }

    /// ``nextSeq`` when it is past ``endSeq``: the writing open that would start a segment there
    /// has not happened, so readers and ``verify()`` report `endSeq..<nextSeq` as missing at the end.
    var resumedSeq: UInt64? { nextSeq > endSeq ? nextSeq : nil }
}
