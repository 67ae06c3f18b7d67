/// What the writer thread does next (``LogState/nextWriterStep(now:)``): the log's state
/// decides, `EventLog.writerLoop` executes, and the lifecycle simulator drives the same
/// decision on a model disk and a model clock.
enum WriterStep: Equatable {
    /// Another thread holds the write or sync token (the pipeline thread, a blocking caller
    /// writing its own record, `suspend()`/`resume()`): sleep until its holder wakes the writer.
    case awaitToken
    /// The log failed (an `fdatasync` failed): fail every waiter, write nothing, and sleep until
    /// woken (by `close()`).
    case failWaiters
    /// A write failed: sleep until the retry at `at` (monotonic ns).
    case retry(at: UInt64)
    /// A group-commit gathering holds the writer: sleep until its deadline (monotonic ns), or
    /// until the group is complete.
    case gather(until: UInt64)
    /// The current block lingers (no caller waits for it): sleep until its deadline (monotonic
    /// ns), or until a caller waits.
    case linger(until: UInt64)
    /// Nothing to write or sync: sleep until woken (an idle log may suspend itself first).
    case idle
    /// Write, or sync (the current block is already sealed when it is to be written).
    case work(WriterWork)
    /// The log is closed, or closing with nothing left to write (or failed and closing): the
    /// writer exits.
    case exit
}

/// The I/O a writing thread does: the writer thread (``WriterStep/work(_:)``), a blocking
/// caller leading a write (``LogState/nextLeaderWork(now:)``) or the pipeline thread
/// (``LogState/nextPipelineWork()``).
enum WriterWork: Equatable {
    /// Write the full blocks, then make them durable when `sync` (a synced caller waits; the
    /// pipeline thread never syncs: the sync in flight will not cover them).
    case write(sync: Bool)
    /// Nothing new to write, but synced callers wait for written records: make them durable.
    case sync
}
