#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch

/// Sealing on every core (``Configuration/sealingThreads``): blocks that appends fill are
/// compressed by sealing lanes while the writer thread seals and writes the ones before them,
/// and the writer writes every block in seq order, whichever finished first.
///
/// Blocks are independent (FORMAT.md §3: one zstd frame each, its own checksum), so they can
/// be sealed side by side, as pzstd and zstd's `ZSTD_c_nbWorkers` compress independent chunks.
/// What ties a block to its place is only the segment it lands in (a compact header is relative
/// to the segment's base and created time): a lane seals for the segment the writer last said
/// is active (``setSegment(_:)``), and the writer uses a lane's block only if it lands in that
/// segment; after a roll it seals the few it cannot use again itself.
///
/// The pipeline, for a block an append filled (``offer(_:)``, the log's lock held):
/// 1. it is queued, and a lane is started if fewer than `sealingThreads − 1` run (a lane is a
///    work item on Dispatch's pool, which ends when the queue is empty: no thread idles
///    between bursts, and none is on Swift's cooperative pool);
/// 2. a lane takes the oldest queued block and seals it (``sealNext()``);
/// 3. the writer, writing its batch in seq order, takes each block's sealed form
///    (``take(_:for:)``): sealed, it copies it; still queued, it seals it itself; being sealed,
///    it seals the next queued block meanwhile, as a lane (so `sealingThreads` blocks are
///    sealed at once), and waits only when none is queued.
///
/// Only blocks an append filled are offered: a block the writer seals at its linger deadline or
/// for a waiting caller is written at once, and a hand-off would only delay it. Memory stays
/// bounded: only blocks in the writer's queue are held, whose bytes `maxPendingBytes` bounds.
///
/// Thread safety: every member may be called from any thread; the lock ranks above the log's
/// (``LockRank/sealing``), so ``offer(_:)`` runs under the log's lock; nothing else is taken
/// while it is held.
final class SealAhead: @unchecked Sendable {
    /// A block a lane sealed: its stored form (header then payload), and the segment it was
    /// sealed for.
    struct Sealed {
        var bytes: [UInt8]
        var header: BlockHeader
        var segment: SegmentContext
    }

    private enum Entry {
        case queued(PendingBlock)
        case sealing
        case sealed(Sealed)
    }

    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let sealedCondition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private let codec: LogCodec
    /// Lanes besides the writer thread.
    private let lanes: Int
    /// Starts a lane (Dispatch's pool; a test runs lanes by hand).
    private let spawn: @Sendable (@escaping @Sendable () -> Void) -> Void
    /// Called by a lane with the first seq of the block it took, before sealing it: a test's
    /// way to hold a lane mid-block.
    private let willSeal: @Sendable (UInt64) -> Void
    /// Called by the writer with the first seq of the block a lane is sealing, each time it
    /// waits for that lane (lock held: it must not block): a test's way to know it waits.
    private let willWait: @Sendable (UInt64) -> Void

    // Guarded by `mutex`.
    /// The blocks offered and not yet taken by the writer, by first seq.
    private var entries: [UInt64: Entry] = [:]
    /// First seqs of queued blocks, oldest first, from `queueHead` on (entries the writer
    /// took meanwhile are skipped).
    private var queue: [UInt64] = []
    private var queueHead = 0
    /// The segment lanes seal for; nil while the writer has no active segment (nothing is
    /// then offered).
    private var segment: SegmentContext?
    private var runningLanes = 0
    /// Encoders (zstd contexts) of lanes not running, reused.
    private var idleEncoders: [BlockEncoder] = []
    /// Buffers of sealed blocks the writer has copied out (``recycle(_:)``), reused by lanes:
    /// a new buffer per block was a fresh heap page to fault in and zero, every block. At
    /// most ``maxIdleBuffers`` are kept.
    private var idleBuffers: [[UInt8]] = []
    private var maxIdleBuffers: Int { lanes + 2 }
    private let level: Int32
    /// Set by ``close()``: nothing more is queued, and lanes end.
    private var closed = false

    /// A pipeline of `sealingThreads − 1` lanes beside the writer, sealing at `level` with the
    /// log's dictionary and key (`codec`). `spawn` starts a lane; by default on Dispatch's pool.
    init(sealingThreads: Int, level: Int32, codec: LogCodec,
         spawn: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void = { DispatchQueue.global(qos: .userInitiated).async(execute: $0) },
         willSeal: @escaping @Sendable (UInt64) -> Void = { _ in }, willWait: @escaping @Sendable (UInt64) -> Void = { _ in }) {
        precondition(sealingThreads >= 2, "one sealing thread is the writer's alone")
        lanes = sealingThreads - 1
        self.level = level
        self.codec = codec
        self.spawn = spawn
        self.willSeal = willSeal
        self.willWait = willWait
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(sealedCondition, nil)
    }

    deinit {
        pthread_cond_destroy(sealedCondition)
        pthread_mutex_destroy(mutex)
        sealedCondition.deallocate()
        mutex.deallocate()
    }

    private func lock() {
        LockOrder.willTake(.sealing, self)
        pthread_mutex_lock(mutex)
    }

    private func unlock() {
        pthread_mutex_unlock(mutex)
        LockOrder.released(self)
    }

    /// The segment the writer's next blocks go into (after every roll), or nil when it has none.
    /// Blocks sealed for another segment are sealed again by the writer when it takes them.
    func setSegment(_ context: SegmentContext?) {
        lock()
        segment = context
        unlock()
    }

    /// Queues a block an append just filled (it is in the writer's queue too), and starts a
    /// lane if one is free. The log's lock may be held: nothing here blocks.
    func offer(_ block: PendingBlock) {
        lock()
        guard !closed, segment != nil, entries[block.firstSeq] == nil else {
            unlock()
            return
        }
        entries[block.firstSeq] = .queued(block)
        queue.append(block.firstSeq)
        let start = runningLanes < lanes
        if start { runningLanes += 1 }
        unlock()
        if start { spawn { [self] in while sealNext() {} } }
    }

    /// One lane's step: seals the oldest queued block. False when there is none (the lane ends).
    func sealNext() -> Bool {
        lock()
        guard let claim = claimOldest() else {
            runningLanes -= 1
            unlock()
            return false
        }
        unlock()
        seal(claim)
        return true
    }

    /// A queued block taken for sealing: its seq, bytes, the segment to seal it for, and an
    /// encoder of its own.
    private struct Claim {
        var seq: UInt64
        var block: PendingBlock
        var segment: SegmentContext
        var encoder: BlockEncoder
        var buffer: [UInt8]
    }

    /// Marks the oldest queued block as being sealed and hands it out. Lock held.
    private func claimOldest() -> Claim? {
        var next: (seq: UInt64, block: PendingBlock)?
        while next == nil, queueHead < queue.count {
            let seq = queue[queueHead]
            queueHead += 1
            if case .queued(let block) = entries[seq] { next = (seq, block) }
        }
        if queueHead == queue.count {
            queue.removeAll(keepingCapacity: true)
            queueHead = 0
        } else if queueHead >= 64 && queueHead * 2 >= queue.count {
            // Under a load that never empties the queue, the consumed head is dropped now and
            // then (amortized O(1)), so the queue holds only what is still queued.
            queue.removeFirst(queueHead)
            queueHead = 0
        }
        guard let (seq, block) = next, !closed, let segment else { return nil }
        entries[seq] = .sealing
        return Claim(seq: seq, block: block, segment: segment, encoder: idleEncoders.popLast() ?? BlockEncoder(level: level),
                     buffer: idleBuffers.popLast() ?? [])
    }

    /// Seals a claimed block (lock not held), then stores it for the writer and wakes it.
    private func seal(_ claim: consuming Claim) {
        willSeal(claim.seq)
        codec.prepare(claim.encoder)
        // Moved out, not copied: a second reference would make the emptying below allocate.
        var bytes: [UInt8] = []
        swap(&bytes, &claim.buffer)
        bytes.removeAll(keepingCapacity: true)
        let header = try? claim.encoder.encode(claim.block, in: claim.segment, into: &bytes)
        lock()
        idleEncoders.append(claim.encoder)
        if case .sealing = entries[claim.seq] {
            // A block that did not seal (never: only a failing cipher throws) goes back to
            // the writer, which seals it itself and reports the error.
            entries[claim.seq] = header.map { .sealed(Sealed(bytes: bytes, header: $0, segment: claim.segment)) }
            pthread_cond_broadcast(sealedCondition)
        }
        unlock()
    }

    /// The writer's take of `block`, about to be written into `segment`: its sealed form if a
    /// lane sealed it for that segment; nil if the writer must seal it itself (nobody did, or it
    /// was sealed for another segment). Removes it either way.
    ///
    /// While a lane is sealing it, the writer does not idle: it seals the oldest queued block
    /// after it, as a lane would, and waits only when none is queued (the lane then has at most
    /// the rest of one block to finish).
    func take(_ block: PendingBlock, for segment: SegmentContext) -> Sealed? {
        lock()
        defer { unlock() }
        while true {
            switch entries[block.firstSeq] {
            case nil:
                return nil
            case .queued:
                entries[block.firstSeq] = nil
                return nil
            case .sealing:
                if let claim = claimOldest() {
                    unlock()
                    seal(claim)
                    lock()
                } else {
                    willWait(block.firstSeq)
                    pthread_cond_wait(sealedCondition, mutex)
                }
            case .sealed(let sealed):
                entries[block.firstSeq] = nil
                guard sealed.segment == segment else { return nil }
                return sealed
            }
        }
    }

    /// Takes the buffer of a sealed block the writer took and copied (leaving `buffer` empty),
    /// for a lane's next block. Moved, not copied: a reference left behind would make the
    /// lane's reuse allocate anyway.
    func recycle(_ buffer: inout [UInt8]) {
        var taken: [UInt8] = []
        swap(&taken, &buffer)
        lock()
        if idleBuffers.count < maxIdleBuffers { idleBuffers.append(taken) }
        unlock()
    }

    /// Forgets every queued and sealed block and takes no more; lanes end after the block they
    /// seal. For the log's close, and a failed log (whose queue is dropped).
    func close() {
        lock()
        closed = true
        entries.removeAll()
        queue.removeAll()
        queueHead = 0
        pthread_cond_broadcast(sealedCondition)
        unlock()
    }

    /// Blocks offered and not yet taken by the writer (queued, being sealed or sealed), and
    /// lanes running: what a test checks is back to zero once everything is taken.
    var held: (blocks: Int, lanes: Int) {
        lock()
        defer { unlock() }
        return (entries.count, runningLanes)
    }
}
