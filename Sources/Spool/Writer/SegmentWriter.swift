/// The writer thread's own state: the active segment file, the block encoder and the output
/// buffer. Not thread-safe: only the holder of the write token (`LogState.writing`: the writer
/// thread, the pipeline thread, or a blocking caller writing its own record) touches it, and
/// `close` after both threads ended. A group's `fdatasync` runs beside it through a
/// ``PendingSync``, which holds only the file.
final class SegmentWriter {
    let directory: String
    let configuration: Configuration
    let logID: LogID
    private let encoder: BlockEncoder
    /// Sealing lanes beside this thread when ``Configuration/sealingThreads`` is above 1: the
    /// log offers them the blocks appends fill, and ``stage(_:_:)`` takes what they sealed.
    /// The one member appends read (a constant; `SealAhead` is thread-safe).
    let sealAhead: SealAhead?
    private let codec: LogCodec
    private var active: FileIO?
    private(set) var activeBase: UInt64 = 0
    private(set) var activeSize: Int64 = 0
    /// The seq the next block in the active segment must start with.
    private(set) var activeEndSeq: UInt64 = 0
    private var activeOpenedAt: UInt64 = 0
    /// The active segment's header's created ms (compact block headers are relative to it).
    private var activeCreatedMillis: Int64 = 0
    /// The active segment's format version: a version-1 segment reopened gets full headers only.
    private var activeVersion = Format.segmentVersion
    /// Whether the active segment holds a block, in the file or encoded in `out` (so a failed
    /// write, which empties `out`, leaves it as the file has it).
    private var activeHasBlocks: Bool { activeSize > Int64(Format.segmentHeaderSize) || !out.isEmpty }
    /// `activeEndSeq` as of the last block that reached the file: a failed write puts it back,
    /// so its retry continues the segment instead of rolling.
    private var flushedEndSeq: UInt64 = 0
    /// Set for good once an `fdatasync` of this writer's own (a roll's, a new segment's header,
    /// its directory `fsync`) failed: the kernel may have dropped the dirty pages and cleared
    /// the error, so a retry that "succeeds" proves nothing (the fsyncgate lesson). The log then
    /// refuses writes. A group's sync (``PendingSync``) fails the log's state directly.
    private(set) var syncFailed = false
    /// Encoded blocks waiting for one `write` call.
    private var out: [UInt8] = []
    /// `SYNCED`, advanced after each `fdatasync` of the active segment (nil until the end of
    /// `init`, which sets it to what opening made durable).
    private var watermark: SyncWatermark?
    /// The active segment file's size on disk: at least `activeSize`; more once synced writes
    /// preallocated zeros past the data (see ``preallocate(through:)``).
    private var fileEnd: Int64 = 0
    /// Zeros written ahead of synced data, so that most `fdatasync`s overwrite allocated
    /// blocks and need not commit a new file size: 1 MiB at a time.
    static let preallocationStep: Int64 = 1 << 20
    /// Cleared when writing zeros failed (a disk almost full, a file-size limit): the data is
    /// then written without them, and the next segment tries again.
    private var preallocates = true
    private static let zeros = [UInt8](repeating: 0, count: Int(preallocationStep))

    /// The active segment as the log's shared state should know it.
    var activeSegment: SegmentInfo? { active == nil ? nil : SegmentInfo(baseSeq: activeBase, size: activeSize) }

    /// The base of an empty active segment that opening replaced because seqs had to skip ahead.
    private(set) var replacedEmptySegment: UInt64?

    /// `active` and `activeHeader` are the active segment as recovery left it (header checked
    /// or rewritten); nil for a log without segments.
    init(directory: String, configuration: Configuration, logID: LogID, codec: LogCodec,
         active: SegmentInfo?, activeHeader: SegmentHeader?, activeEndSeq: UInt64, nextSeq: UInt64) throws {
        self.directory = directory
        self.configuration = configuration
        self.logID = logID
        self.encoder = BlockEncoder(level: configuration.compressionLevel)
        self.sealAhead = configuration.sealingThreads > 1
            ? SealAhead(sealingThreads: configuration.sealingThreads, level: configuration.compressionLevel, codec: codec) : nil
        self.codec = codec
        out.reserveCapacity(4 * configuration.blockSize)
        if let active, active.size <= Int64(Format.segmentHeaderSize), nextSeq != active.baseSeq {
            // An empty active segment whose name no longer fits the next seq: replace it.
            try DirectoryIO.remove(directory + "/" + active.name)
            replacedEmptySegment = active.baseSeq
            try createSegment(baseSeq: nextSeq)
        } else if let active {
            guard let activeHeader else { preconditionFailure("recovery returns the header of the active segment") }
            self.active = try FileIO.open(directory + "/" + active.name, .readWrite)
            fileEnd = active.size
            activeCreatedMillis = activeHeader.createdMillis
            activeVersion = activeHeader.version
            activeBase = active.baseSeq
            activeSize = active.size
            self.activeEndSeq = activeEndSeq
            flushedEndSeq = activeEndSeq
            activeOpenedAt = monotonicNanos()
            sealAhead?.setSegment(activeContext)
            do {
                if activeHasBlocks && activeEndSeq != nextSeq {
                    // Seqs skip ahead (a power loss cut records a consumer had passed): seal this
                    // segment now, so readers see the gap as missing at once, not at the next write.
                    // (The log's open lists the segments from the files after this.)
                    var ignored = Outcome()
                    try roll(toBase: nextSeq, &ignored)
                } else {
                    // Its records will count as synced, but a killed process's written blocks
                    // may be in the page cache only.
                    try syncActive()
                }
            } catch {
                close()
                throw error
            }
        } else {
            try createSegment(baseSeq: nextSeq)
        }
        do {
            // Every record below `nextSeq` is durable now: sealed, synced above, or skipped.
            watermark = try SyncWatermark(directory: directory, syncedThrough: nextSeq, permissions: configuration.fileMode)
        } catch {
            close()
            throw error
        }
    }

    /// Closes the active segment, cutting off preallocated zeros (best effort: a crash before
    /// this leaves them, and recovery cuts them).
    func close() {
        if let active, fileEnd > activeSize { try? active.truncate(to: activeSize) }
        active?.close()
        active = nil
        watermark?.close()
    }

    /// Whether ``suspend()`` closed an active segment that ``resume(known:)`` reopens.
    private var suspendedActive = false

    /// ``EventLog/suspend()``: closes the active segment as ``close()`` does, keeping what this
    /// writer knows of it for ``resume(known:)``.
    func suspend() {
        suspendedActive = active != nil
        close()
    }

    /// Reopens the active segment ``suspend()`` closed, once sure no other writer changed the
    /// log meanwhile (the directory lock was free while suspended): the directory must hold
    /// exactly the segments `known` lists, and the active one the bytes this writer left. One
    /// directory listing, one `open`, one `fstat`.
    /// - Throws: `.locked` naming what changed (the caller must close and open the log again,
    ///   which recovers what the other writer left); `.io` if a file cannot be opened.
    func resume(known: [SegmentInfo]) throws {
        let onDisk = Set(try DirectoryIO.list(directory).compactMap(Format.baseSeq(ofSegmentNamed:)))
        guard onDisk == Set(known.map(\.baseSeq)) else {
            throw changedWhileSuspended("its segment files are not the ones it left")
        }
        guard suspendedActive else {
            try watermark?.reopen()
            return
        }
        let file = try FileIO.open(directory + "/" + Format.segmentName(activeBase), .readWrite)
        let size: Int64
        do { size = try file.size() } catch {
            file.close()
            throw error
        }
        guard size == activeSize else {
            file.close()
            throw changedWhileSuspended("its active segment holds \(size) bytes, not the \(activeSize) it left")
        }
        do { try watermark?.reopen() } catch {
            file.close()
            throw error
        }
        active = file
        fileEnd = size
        suspendedActive = false
    }

    private func changedWhileSuspended(_ what: String) -> SpoolError {
        SpoolError(.locked, "another writer changed the log while this one was suspended (\(what)); close this EventLog and open the log again", path: directory)
    }

    /// What writing a batch achieved, step by step (``stage(_:_:)``, ``writeStaged(_:preallocating:_:)``,
    /// ``syncActive()``): the writer reports it and never calls its caller.
    struct Outcome {
        /// Blocks now in a segment file (a prefix of the batch).
        var blocksWritten = 0
        /// Stored and raw bytes of those blocks.
        var storedBytes = 0
        var rawBytes = 0
        /// Segments sealed while writing the batch, with their final sizes, in order.
        var sealed: [SegmentInfo] = []
        var fsyncs = 0
        /// How many of the blocks written a sealing lane sealed (``SealAhead``).
        var sealedInParallel = 0
        /// The error that stopped the batch, if any; blocks after `blocksWritten` were not
        /// stored. If ``SegmentWriter/syncFailed`` is set, it came from an `fsync`.
        var error: SpoolError?
    }

    /// Blocks ``stage(_:_:)`` encoded for one write into the active segment, not yet written.
    struct Staged {
        /// How many blocks of the staged slice (a prefix of it).
        var blocks: Int
        /// The active segment's size once they are written: stored, compressed bytes, so that
        /// the cap is enforced on what reaches the disk, not on the records' raw size.
        var activeSizeAfter: Int64
        /// How many of them a sealing lane sealed (``SealAhead``).
        var sealedAhead = 0
        /// Whether the step began by rolling: a segment was sealed (in the outcome's `sealed`)
        /// and a new active one made (``activeSegment``).
        var rolled: Bool
    }

    /// Encodes the longest prefix of `batch` that one write to the active segment can take,
    /// first rolling to a new segment if the batch's first block needs one (the roll is in
    /// `outcome`). Writes none of the encoded blocks: ``writeStaged(_:preallocating:_:)`` does,
    /// once the caller has made room for them (the cap). On a throw, call ``discardStaged()``.
    func stage(_ batch: ArraySlice<PendingBlock>, _ outcome: inout Outcome) throws -> Staged {
        precondition(out.isEmpty, "a staged write was neither written nor discarded")
        var staged = Staged(blocks: 0, activeSizeAfter: activeSize, rolled: false)
        guard let first = batch.first else { return staged }
        if needsRoll(before: first) {
            try roll(toBase: first.firstSeq, &outcome)
            staged.rolled = true
        }
        let segment = activeContext
        codec.prepare(encoder)
        for block in batch {
            if staged.blocks > 0 && needsRoll(before: block) { break }
            // A block a sealing lane sealed for this segment is copied; any other is sealed here.
            let header: BlockHeader
            if var sealed = sealAhead?.take(block, for: segment) {
                out.append(contentsOf: sealed.bytes)
                header = sealed.header
                staged.sealedAhead += 1
                sealAhead?.recycle(&sealed.bytes)
            } else {
                header = try encoder.encode(block, in: segment, into: &out)
            }
            codec.didEncode(block, header: header, segment: activeBase)
            staged.blocks += 1
            stagedStored += header.totalSize
            stagedRaw += block.raw.count
            activeEndSeq = block.firstSeq + UInt64(block.count)
        }
        staged.activeSizeAfter = activeSize + Int64(out.count)
        return staged
    }

    /// Writes what ``stage(_:_:)`` encoded with one call (after zeros ahead of it when
    /// `preallocating`). On failure the file is cut back so no partial block is left behind;
    /// call ``discardStaged()``.
    func writeStaged(_ staged: Staged, preallocating: Bool, _ outcome: inout Outcome) throws {
        try flush(preallocating: preallocating)
        outcome.blocksWritten += staged.blocks
        outcome.sealedInParallel += staged.sealedAhead
        outcome.storedBytes += stagedStored
        outcome.rawBytes += stagedRaw
        stagedStored = 0
        stagedRaw = 0
    }

    /// Forgets blocks staged and not written (a step failed): the next write of them
    /// continues the segment as the file has it.
    func discardStaged() {
        out.removeAll(keepingCapacity: true)
        activeEndSeq = flushedEndSeq
        stagedStored = 0
        stagedRaw = 0
    }

    /// Stored and raw bytes of the blocks staged and not yet written.
    private var stagedStored = 0
    private var stagedRaw = 0

    /// `fdatasync` of the active segment (at open), then the synced watermark moved to what it
    /// made durable (one `pwrite`, no sync: FORMAT.md §6).
    func syncActive() throws {
        guard let sync = prepareSync() else { return }
        try remembering { try sync.run() }
    }

    /// An `fdatasync` of the active segment as it is now, to run on any thread while the write
    /// token's holder goes on writing into the same file (``prepareSync()``). It holds only the
    /// file and the watermark, never the writer's own state: the writer neither rolls nor closes
    /// the file while one runs (`LogState.syncTarget`).
    struct PendingSync {
        let file: FileIO
        /// The seq past the last block written when it was prepared: what it makes durable.
        let end: UInt64
        let watermark: SyncWatermark?

        /// Makes what was written before ``SegmentWriter/prepareSync()`` durable, then moves the
        /// synced watermark to it (one `pwrite`, no sync: FORMAT.md §6). Blocks written after
        /// the preparation may be made durable too; they are not counted.
        func run() throws {
            try file.syncData()
            watermark?.advance(to: end)
        }
    }

    /// The sync of what is written so far, or nil without an active segment (a roll failed
    /// after sealing). Write token held.
    func prepareSync() -> PendingSync? {
        guard let active else { return nil }
        return PendingSync(file: active, end: flushedEndSeq, watermark: watermark)
    }

    /// Runs an `fsync`; a failure sets ``syncFailed`` for good.
    private func remembering(_ sync: () throws -> Void) throws {
        do { try sync() } catch {
            syncFailed = true
            throw error
        }
    }

    /// Whether a block has to start a new segment: the active one is full, too old, or the
    /// block's seq does not continue it (seqs skipped after a power loss). A write during an
    /// `fdatasync` (which holds the active file) stops before such a block.
    func needsRoll(before block: PendingBlock) -> Bool {
        guard active != nil else { return true }  // a roll failed after sealing the last one
        guard activeHasBlocks else { return false }
        if block.firstSeq != activeEndSeq { return true }
        if activeSize + Int64(out.count) >= Int64(configuration.segmentSize) { return true }
        if let age = configuration.segmentMaxAge {
            // Saturating: an age of `.seconds(Int64.max)` is valid (positive) and means never.
            if monotonicNanos() - activeOpenedAt >= UInt64(age.wholeNanoseconds) { return true }
        }
        return false
    }

    /// Writes the output buffer to the active segment with one call (after zeros ahead of it when
    /// `preallocating`). On failure the file is cut back so no partial block is left behind.
    private func flush(preallocating: Bool) throws {
        guard !out.isEmpty, let active else { return }
        if preallocating && preallocates {
            do {
                try preallocate(through: activeSize + Int64(out.count))
            } catch {
                // Zeros are an optimisation: never let them take the space the data needs.
                try? active.truncate(to: activeSize)
                fileEnd = activeSize
                preallocates = false
            }
        }
        do {
            try active.write(out, at: activeSize)
        } catch {
            try? active.truncate(to: activeSize)
            fileEnd = activeSize
            throw error
        }
        activeSize += Int64(out.count)
        fileEnd = max(fileEnd, activeSize)
        flushedEndSeq = activeEndSeq
        out.removeAll(keepingCapacity: true)
    }

    /// Makes sure zeros are written up to past `end` (in whole steps, never past the segment
    /// size by more than one step), so the data written there next overwrites allocated blocks:
    /// the `fdatasync` that follows commits the new size once per step instead of every time.
    /// Only synced writes preallocate (the zeros are written once, then overwritten).
    private func preallocate(through end: Int64) throws {
        guard let active, end > fileEnd else { return }
        let step = Self.preallocationStep
        let target = min((end / step + 1) * step, max(end, Int64(configuration.segmentSize) + step))
        var offset = fileEnd
        while offset < target {
            let count = Int(min(step, target - offset))
            try Self.zeros.withUnsafeBytes { try active.write(UnsafeRawBufferPointer(rebasing: $0[0..<count]), at: offset) }
            offset += Int64(count)
        }
        fileEnd = target
    }

    /// Seals the active segment (fdatasync, close) and creates the next one, named `base`. A
    /// roll that failed after sealing still reports the sealed segment, at its final size, in
    /// `outcome` (the blocks written just before the roll changed it).
    private func roll(toBase base: UInt64, _ outcome: inout Outcome) throws {
        if let active {
            if fileEnd > activeSize { try active.truncate(to: activeSize) }
            try remembering { try active.syncData() }
            outcome.fsyncs += 1
            active.close()
            self.active = nil
            sealAhead?.setSegment(nil)
            let sealed = SegmentInfo(baseSeq: activeBase, size: activeSize)
            outcome.sealed.append(sealed)
        }
        try createSegment(baseSeq: base)
        outcome.fsyncs += 1  // the new segment's header
    }

    /// Creates a segment file with its header, and makes the header and then the directory
    /// entry durable before any block is written after it: a power cut that keeps later pages
    /// of the file can then never leave blocks behind a header that is not there (FORMAT.md §6).
    /// One `fdatasync` per segment.
    private func createSegment(baseSeq: UInt64) throws {
        let path = directory + "/" + Format.segmentName(baseSeq)
        try DirectoryIO.remove(path)  // a leftover of an earlier failed attempt holds no acknowledged record
        let file = try FileIO.open(path, .createNew(permissions: configuration.fileMode))
        let created = wallClockMillis()
        let header = SegmentHeader(baseSeq: baseSeq, createdMillis: created, logID: logID).encoded()
        do {
            try file.write(header, at: 0)
            try remembering { try file.syncData() }
            try remembering { try DirectoryIO.sync(directory) }
        } catch {
            file.close()
            try? DirectoryIO.remove(path)
            throw error
        }
        active = file
        fileEnd = Int64(header.count)
        preallocates = true
        activeCreatedMillis = created
        activeVersion = Format.segmentVersion
        activeBase = baseSeq
        activeSize = Int64(header.count)
        activeEndSeq = baseSeq
        flushedEndSeq = baseSeq
        activeOpenedAt = monotonicNanos()
        sealAhead?.setSegment(activeContext)
    }

    /// What blocks written into the active segment are sealed for.
    private var activeContext: SegmentContext {
        SegmentContext(baseSeq: activeBase, createdMillis: activeCreatedMillis, version: activeVersion)
    }
}
