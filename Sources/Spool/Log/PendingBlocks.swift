/// The records appended and not yet written, as blocks: the one appends fill, the sealed ones
/// waiting for the writer in order, and emptied ones kept for their buffers, so the append
/// path allocates nothing once warm. Part of ``LogState``, which alone drives it (appends,
/// seals, a write's batch taken and given back). Pure: no I/O, no clock.
struct PendingBlocks {
    /// The block being filled by appends.
    private(set) var current = PendingBlock()
    /// Blocks filled (or lingered out) and waiting for the writer, oldest first.
    private(set) var full: [PendingBlock] = []
    /// An empty array kept for its capacity: `full` while a batch is being written, then the
    /// written batch's (see ``takeFull()``).
    private var idleFull: [PendingBlock] = []
    /// Emptied blocks whose buffers are reused.
    private(set) var spare: [PendingBlock] = []
    /// Framed bytes appended and not yet written (current + full + being written).
    private(set) var bytes = 0
    /// The size at which an append seals the current block (``Configuration/blockSize``).
    let blockSize: Int

    init(blockSize: Int) {
        self.blockSize = blockSize
    }

    /// Nothing is pending: no record in the current block, no block waiting.
    var isEmpty: Bool { current.isEmpty && full.isEmpty }

    /// Copies the record `seq` into the current block: one that would take the current block
    /// past the format's bound on a block's raw length starts a new one, and a block reaching
    /// ``blockSize`` is sealed. Returns whether a block was sealed, whether this record started
    /// one, and the block it filled, if it did (sealed, now last in ``full``; its bytes are
    /// shared). `now` is read only when the record starts a block (its linger clock).
    @inline(__always)
    mutating func add(_ payload: UnsafeRawBufferPointer, timestamp: Int64, seq: UInt64, now: @autoclosure () -> UInt64)
        -> (sealed: Bool, started: Bool, filled: PendingBlock?)
    {
        let framed = PendingBlock.framedSize(payload.count)
        var sealed = false
        if !current.isEmpty, current.raw.count + framed > Format.maxRawLength {
            seal(nextSeq: seq)
            sealed = true
        }
        let started = current.isEmpty
        if started {
            current.firstSeq = seq
            current.openedAt = now()
        }
        current.add(payload, timestamp: timestamp)
        bytes += framed
        var filled: PendingBlock?
        if current.raw.count >= blockSize {
            seal(nextSeq: seq + 1)
            filled = full.last
            sealed = true
        }
        return (sealed, started, filled)
    }

    /// Moves the current block to the writer's queue and starts a new one, for `nextSeq`, from
    /// a spare buffer.
    mutating func seal(nextSeq: UInt64) {
        guard !current.isEmpty else { return }
        var next = spare.popLast() ?? PendingBlock()
        next.reset(firstSeq: nextSeq)
        if next.raw.capacity < blockSize {
            next.raw.reserveCapacity(blockSize + blockSize / 4)
        }
        swap(&next, &current)
        full.append(next)
    }

    /// The full blocks, for a write: ``full`` becomes the idle array (empty, with capacity), so
    /// blocks sealed meanwhile need no allocation; the batch's array comes back as the next
    /// idle one in ``wrote(_:of:)``.
    mutating func takeFull() -> [PendingBlock] {
        let batch = full
        full = idleFull
        idleFull = []
        return batch
    }

    /// The first `written` blocks of `batch` (from ``takeFull()``) are written: their bytes stop
    /// counting, their buffers are kept (a few blocks' worth), and the unwritten rest goes back
    /// to the front of the queue, in order (a write error, a write during a sync that stopped
    /// at a roll). `batch` is emptied and kept, for its capacity, as the next idle array.
    mutating func wrote(_ written: Int, of batch: inout [PendingBlock]) {
        // By index, not through a slice: a slice would share the batch's storage, and the
        // recycling below must find the batch sole owner of its blocks.
        for index in 0..<written { bytes -= batch[index].charge }
        // Each is emptied in place while the batch alone holds it: emptying a shared copy
        // would allocate anew.
        for index in 0..<written where spare.count < 8 {
            batch[index].reset(firstSeq: 0)
            spare.append(batch[index])
        }
        if written < batch.count {
            full.insert(contentsOf: batch.dropFirst(written), at: 0)
        }
        // Emptied before the log's lock is next released, so the recycled buffers are unshared.
        batch.removeAll(keepingCapacity: true)
        swap(&batch, &idleFull)
    }

    /// Gives up every pending record (a write failed while closing): the next block starts at
    /// `nextSeq`.
    mutating func discardAll(nextSeq: UInt64) {
        full.removeAll()
        current.reset(firstSeq: nextSeq)
        bytes = 0
    }
}
