import Logging

/// A read-only view of a log, for tools that look without changing anything (`spool verify`,
/// `spool stat`, `spool dump`) and for checking what a crash left before anything repairs it.
///
/// Opening applies recovery's rules to find what a writing ``EventLog/open(directory:configuration:logger:metricsFactory:)``
/// would repair (a torn tail, damage inside the active segment, leftover temporary files,
/// unreadable offset files) and reports it in ``recoveryReport`` with `repaired` false, without
/// touching a file: reading stops where a writing open would cut. A snapshot writes, syncs and
/// deletes nothing; it only creates the empty LOCK file if there is none.
///
/// It holds a shared lock on the directory: snapshots can be open together, an `EventLog` cannot
/// be open with one (whichever comes second gets `.locked`), so the files cannot change under it.
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
    public var nextSeq: UInt64 { max(endSeq, consumerOffsets.values.max() ?? 0) }

    let codec: LogCodec
    private let segments: [SegmentInfo]
    private let directoryLock: DirectoryLock

    /// Opens a snapshot of the log in `directory`.
    /// - Parameters:
    ///   - directory: the log's directory; it must hold a log (a snapshot creates none).
    ///   - configuration: only its `encryption` keys are used, to read encrypted blocks.
    ///   - logger: where the snapshot logs what recovery would repair, never payloads.
    /// - Throws: ``SpoolError`` `.invalidArgument` if `directory` holds no log; `.locked` if an
    ///   `EventLog` has it open; `.corrupt` if no file names the log's identity or the active
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
        let directoryLock = try DirectoryLock(directory: directory, permissions: configuration.fileMode, shared: true)
        do {
            let recovered = try Recovery.recover(directory: directory, configuration: configuration, repairing: false, logger: logger)
            codec = try LogCodec(directory: directory, configuration: configuration, logID: recovered.meta.logID,
                                 inheritedThrough: recovered.segments.last?.baseSeq, readOnly: true, logger: logger)
            self.directory = directory
            self.directoryLock = directoryLock
            id = recovered.meta.logID
            recoveryReport = recovered.report
            consumerOffsets = recovered.consumerOffsets
            segments = recovered.segments
            endSeq = recovered.endSeq
        } catch {
            directoryLock.release()
            throw error
        }
    }

    deinit { directoryLock.release() }

    /// Releases the shared lock. Readers made from the snapshot must not be used after it.
    /// Closing twice is harmless.
    public func close() {
        codec.close()
        directoryLock.release()
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
    public func verify() throws -> VerifyReport {
        try verifyAll(from: firstSeq, recovery: recoveryReport)
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
