import Metrics

/// The log's swift-metrics instruments, labelled `spool_*` with a `log` dimension (the directory).
/// With no metrics backend bootstrapped they cost next to nothing.
struct LogMetrics {
    /// Records written to segment files (counted by the writer, so the append path stays free of it).
    let appendedRecords: Counter
    let blocksWritten: Counter
    /// Blocks a sealing lane sealed (``Configuration/sealingThreads``), among those written.
    let blocksSealedInParallel: Counter
    /// Blocks the pipeline thread wrote while a group's `fdatasync` ran, among those written.
    let blocksWrittenDuringSync: Counter
    let storedBytes: Counter
    let rawBytes: Counter
    let fsyncs: Counter
    let droppedRecords: Counter
    let expiredRecords: Counter
    let segmentsDeleted: Counter
    /// Sealed segments cold recompression rewrote, and the bytes it saved.
    let segmentsRecompressed: Counter
    let recompressionSavedBytes: Counter
    let diskBytes: Gauge
    let segments: Gauge

    /// Instruments from `factory`, or from the process-wide `MetricsSystem` when nil.
    init(directory: String, factory: (any MetricsFactory)?) {
        let dimensions = [("log", directory)]
        let factory = factory ?? MetricsSystem.factory
        func counter(_ label: String) -> Counter { Counter(label: label, dimensions: dimensions, factory: factory) }
        func gauge(_ label: String) -> Gauge { Gauge(label: label, dimensions: dimensions, factory: factory) }
        appendedRecords = counter("spool_appended_records")
        blocksWritten = counter("spool_blocks_written")
        blocksSealedInParallel = counter("spool_blocks_sealed_in_parallel")
        blocksWrittenDuringSync = counter("spool_blocks_written_during_sync")
        storedBytes = counter("spool_stored_bytes")
        rawBytes = counter("spool_raw_bytes")
        fsyncs = counter("spool_fsyncs")
        droppedRecords = counter("spool_dropped_records")
        expiredRecords = counter("spool_expired_records")
        segmentsDeleted = counter("spool_segments_deleted")
        segmentsRecompressed = counter("spool_segments_recompressed")
        recompressionSavedBytes = counter("spool_recompression_saved_bytes")
        diskBytes = gauge("spool_disk_bytes")
        segments = gauge("spool_segments")
    }

    func recordWrite(records: Int, blocks: Int, sealedInParallel: Int, stored: Int, raw: Int, fsyncs count: Int) {
        if blocks > 0 {
            appendedRecords.increment(by: records)
            blocksWritten.increment(by: blocks)
            if sealedInParallel > 0 { blocksSealedInParallel.increment(by: sealedInParallel) }
            storedBytes.increment(by: stored)
            rawBytes.increment(by: raw)
        }
        if count > 0 { fsyncs.increment(by: count) }
    }

    func recordSegments(count: Int, diskBytes bytes: Int64) {
        segments.record(count)
        diskBytes.record(bytes)
    }
}

/// A snapshot of a log's figures, for apps without a metrics backend.
public struct LogStats: Sendable, Equatable {
    /// The seq of the oldest stored record, and the seq the next append gets.
    public var firstSeq: UInt64
    /// The seq the next append gets.
    public var nextSeq: UInt64
    /// The end (exclusive) of the written records: every record below this seq is written.
    public var writtenEnd: UInt64
    /// The end (exclusive) of the durable records: every record below this seq is durable.
    public var syncedEnd: UInt64
    /// Segment files and their bytes on disk.
    public var segments: Int
    /// Bytes of the segment files' valid data.
    public var diskBytes: Int64
    /// Bytes appended but not yet written (framed).
    public var pendingBytes: Int
    /// Since open: records and payload bytes appended.
    public var appendedRecords: UInt64
    /// Since open: payload bytes appended.
    public var appendedBytes: UInt64
    /// Since open: blocks written, their stored (compressed) and raw bytes, fsyncs.
    public var blocksWritten: UInt64
    /// Since open: how many of ``blocksWritten`` were sealed side by side with others
    /// (``Configuration/sealingThreads``): a writer that keeps up seals one at a time.
    public var blocksSealedInParallel: UInt64
    /// Since open: bytes the written blocks take on disk (headers included).
    public var storedBytes: UInt64
    /// Since open: uncompressed bytes of the written blocks' records areas.
    public var rawBytes: UInt64
    /// Since open: `fdatasync` calls (segment seals included).
    public var fsyncs: UInt64
    /// Since open: records dropped by the `dropOldest` cap before every consumer read them
    /// (expired records are counted apart, in ``expiredRecords``).
    public var droppedRecords: UInt64
    /// Since open: records consumers skipped as expired, counted once per consumer that
    /// skipped them (two consumers passing one expired record count 2).
    public var expiredRecords: UInt64
    /// Since open: sealed segments deleted by retention (every consumer had passed them).
    public var retainedSegmentsDeleted: UInt64
    /// Since open: failed writes (the writer retried them).
    public var writeErrors: UInt64
    /// Since open: sealed segments cold recompression rewrote (``Configuration/coldCompression``).
    public var segmentsRecompressed: UInt64 = 0
    /// Since open: bytes those rewrites saved on disk (old size less new, summed).
    public var bytesSavedByRecompression: UInt64 = 0
    /// Since open: how many of ``blocksWritten`` were written while a group's `fdatasync` ran
    /// (the two-stage group commit): the blocks of `written` and buffered callers, and of the
    /// next synced group, that did not wait for another group's sync.
    public var blocksWrittenDuringSync: UInt64 = 0

    /// Raw bytes per stored byte of the blocks written since open (0 before the first block).
    public var compressionRatio: Double { storedBytes == 0 ? 0 : Double(rawBytes) / Double(storedBytes) }
}

extension EventLog {
    /// The log's figures now.
    public func stats() -> LogStats {
        lock.withLock {
            let c = state.counters
            return LogStats(
                firstSeq: state.firstSeq, nextSeq: state.nextSeq, writtenEnd: state.writtenEnd,
                syncedEnd: state.syncedEnd, segments: state.table.segments.count, diskBytes: state.table.diskBytes,
                pendingBytes: state.pending.bytes, appendedRecords: c.appendedRecords, appendedBytes: c.appendedBytes,
                blocksWritten: c.blocksWritten, blocksSealedInParallel: c.blocksSealedInParallel, storedBytes: c.storedBytes, rawBytes: c.rawBytes, fsyncs: c.fsyncs,
                droppedRecords: c.droppedRecords, expiredRecords: c.expiredRecords,
                retainedSegmentsDeleted: c.retainedSegmentsDeleted, writeErrors: c.writeErrors,
                segmentsRecompressed: c.segmentsRecompressed, bytesSavedByRecompression: c.bytesSavedByRecompression,
                blocksWrittenDuringSync: c.blocksWrittenDuringSync)
        }
    }
}
