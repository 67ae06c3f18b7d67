import Foundation

extension EventLog {
    /// Appends one record at `buffered` durability and returns its seq at once.
    ///
    /// The record is copied into the pending block; it reaches the file within
    /// `Configuration.linger` or when the block fills. No system call, no compression.
    /// If more than `Configuration.maxPendingBytes` are waiting for the writer, the call waits
    /// for it (backpressure), so memory stays bounded.
    /// - Throws: `.recordTooLarge` (names the size and the limit); `.full` under the `rejectNew` cap,
    ///   or once every seq below the format's ceiling (2^62) is taken;
    ///   the writer's error while it is stalled or failed; `.closed`.
    /// - Complexity: O(payload size).
    @discardableResult
    public func append(_ payload: UnsafeRawBufferPointer) throws -> UInt64 {
        try checkSize(payload.count)
        let timestamp = wallClockMillis()
        lock.lock()
        defer { lock.unlock() }
        return try enqueue(payload, timestamp: timestamp)
    }

    /// Appends one record at `buffered` durability. See ``append(_:)-(UnsafeRawBufferPointer)``.
    @discardableResult
    public func append(_ payload: [UInt8]) throws -> UInt64 {
        try payload.withUnsafeBytes { try append($0) }
    }

    /// Appends the UTF-8 bytes of `text` at `buffered` durability.
    @discardableResult
    public func append(_ text: String) throws -> UInt64 {
        var text = text
        return try text.withUTF8 { try append(UnsafeRawBufferPointer($0)) }
    }

    /// Appends the bytes of `data` at `buffered` durability.
    @discardableResult
    public func append(_ data: Data) throws -> UInt64 {
        try data.withUnsafeBytes { try append($0) }
    }

    /// Appends `value` encoded as JSON at `buffered` durability.
    @discardableResult
    public func append(json value: some Encodable) throws -> UInt64 {
        try append(try JSONEncoder().encode(value))
    }

    /// Appends one record and returns once it is as durable as `durability` asks.
    ///
    /// `.written`: the block holding it is in the segment file (survives `kill -9`).
    /// `.synced`: it is durable (survives power loss). Many concurrent callers share one write
    /// and one `fdatasync` (group commit). The wait is a continuation, not a blocked thread
    /// (only backpressure, more than `maxPendingBytes` waiting, holds the calling thread until
    /// the writer makes room, as in ``append(_:)-(UnsafeRawBufferPointer)``).
    /// - Throws: as ``append(_:)-(UnsafeRawBufferPointer)``, plus the write or sync error if the
    ///   block could not be stored: the record is then not acknowledged. That error's
    ///   ``SpoolError/seq`` is the record's: after a write error it stays queued under that seq
    ///   and the writer retries (see ``SpoolError/Code/diskFull``).
    @discardableResult
    public func append(_ payload: [UInt8], durability: Durability) async throws -> UInt64 {
        if durability == .buffered { return try append(payload) }
        try checkSize(payload.count)
        let timestamp = wallClockMillis()
        // An idle-suspended log is resumed off the cooperative pool (its open and listing are
        // file I/O); only an idle suspension racing this append resumes inside `enqueue`.
        if configuration.suspendsWhenIdle && isSuspended { try await offload { try self.resume() } }
        // One lock round trip: the record and its waiter go in together.
        var seq: UInt64 = 0
        try await suspendUntilStored(durability) {
            seq = try payload.withUnsafeBytes { try enqueue($0, timestamp: timestamp) }
            return Wait(end: seq + 1, record: seq)
        }
        return seq
    }

    /// Appends one record and blocks the calling thread until it is as durable as `durability`
    /// asks. Do not call it on Swift's cooperative pool; use the `async` variant there.
    @discardableResult
    public func appendBlocking(_ payload: [UInt8], durability: Durability) throws -> UInt64 {
        let seq = try append(payload)
        try waitBlocking(Wait(end: seq + 1, record: seq), durability)
        return seq
    }

    /// Returns once every record below `end` (already appended) is as durable as `durability`
    /// asks. `end` is exclusive, as every offset in Spool's API: a producer that appended up to
    /// seq `s` at `buffered` waits for `before: s + 1`, or for ``nextSeq`` to cover all it
    /// appended. `before: 0` returns at once.
    /// - Throws: the write or sync error that kept a record from its level, its
    ///   ``SpoolError/seq`` the first record that did not reach it; `.invalidArgument` when
    ///   `end` is past ``nextSeq``; `.closed`.
    public func waitUntil(before end: UInt64, is durability: Durability) async throws {
        if durability == .buffered { return }
        try await suspendUntilStored(durability) {
            if let result = immediateResult(Wait(end: end, record: nil), durability) {
                try result.get()
                return nil
            }
            return Wait(end: end, record: nil)
        }
    }

    /// Blocks until every record below `end` is as durable as `durability` asks: the blocking
    /// form of ``waitUntil(before:is:)``. Not for the cooperative pool.
    public func waitUntilBlocking(before end: UInt64, is durability: Durability) throws {
        try waitBlocking(Wait(end: end, record: nil), durability)
    }

    /// Suspends until a range of records is as durable as `durability` asks. `prepare` runs
    /// under the lock and returns what to wait for, nil if there is nothing to wait for, or throws.
    private func suspendUntilStored(_ durability: Durability, _ prepare: () throws -> Wait?) async throws {
        try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
            lock.lock()
            let wait: Wait?
            do {
                wait = try prepare()
            } catch {
                lock.unlock()
                continuation.resume(throwing: error)
                return
            }
            guard let wait else {
                lock.unlock()
                continuation.resume()
                return
            }
            let wake = state.addWaiter(Waiter(wait: wait, level: durability, kind: .async(continuation)))
            let duringSync = state.group.syncTarget != nil
            lock.unlock()
            if wake { self.wake(pipeline: duringSync) }
        }
    }

    /// Blocks until `wait` is as durable as `durability` asks. Not for the cooperative pool.
    private func waitBlocking(_ wait: Wait, _ durability: Durability) throws {
        if durability == .buffered { return }
        lock.lock()
        defer { lock.unlock() }
        if let result = immediateResult(wait, durability) { return try result.get() }
        let id = state.addBlockingWaiter(wait, level: durability)
        // This thread may block: if no one is writing, write here (one caller alone gets its
        // record written without two thread hand-offs); otherwise wake the writer, once.
        var wokeWriter = false
        while true {
            if let result = state.takeBlockingResult(id) { return try result.get() }
            if leadWrite() { continue }
            if !wokeWriter && state.shouldWakeWriter(for: durability) {
                wakeForWork()
                wokeWriter = true
            }
            lock.progressWait()
        }
    }

    /// Makes every record appended so far durable; returns when it is.
    public func sync() async throws {
        try await waitUntil(before: nextSeq, is: .synced)
    }

    /// Blocking variant of ``sync()``. Not for the cooperative pool.
    public func syncBlocking() throws {
        try waitUntilBlocking(before: nextSeq, is: .synced)
    }

    // MARK: - Internals (lock held)

    @inline(__always)
    func checkSize(_ count: Int) throws {
        guard count <= configuration.maxRecordSize else {
            throw SpoolError(.recordTooLarge, "a record of \(count) bytes is larger than Configuration.maxRecordSize (\(configuration.maxRecordSize) bytes)")
        }
    }

    /// Whether `wait` can finish now: its result, or nil to wait. Lock held.
    private func immediateResult(_ wait: Wait, _ durability: Durability) -> Result<Void, any Error>? {
        let mark = durability == .synced ? state.syncedEnd : state.writtenEnd
        if wait.end <= mark { return .success(()) }
        if wait.end > state.nextSeq {
            return .failure(SpoolError(.invalidArgument, "records up to \(wait.end) have not been appended (the next seq is \(state.nextSeq))"))
        }
        switch state.status {
        case .stalled:
            // The writer retries (within a second): the wait ends with its outcome, so a caller
            // waiting again for a record whose append failed neither spins nor gives up early.
            return nil
        case .open, .suspending, .suspended: return nil
        case .closing where !state.group.writerExited: return nil
        case .failed, .closed, .closing:
            // (Closing with the writer gone: nobody is left to complete a new waiter.)
            var error = state.status.error!
            error.seq = wait.record ?? mark
            return .failure(error)
        }
    }

    /// Assigns the next seq and copies the record into the pending block. Lock held.
    @inline(__always)
    private func enqueue(_ payload: UnsafeRawBufferPointer, timestamp: Int64) throws -> UInt64 {
        let framed = PendingBlock.framedSize(payload.count)
        while true {
            if state.status.suspendingOrSuspended && configuration.suspendsWhenIdle {
                // Suspended while idle: take the log back first (resume takes the lifecycle
                // lock before this one, so this one is let go meanwhile).
                lock.unlock()
                let resumed = Result { try resume() }
                lock.lock()
                try resumed.get()
                continue
            }
            if !state.status.isOpen, let error = state.status.error { throw error }
            if configuration.capPolicy == .rejectNew, let cap = configuration.maxBytes {
                switch DiskCap(maxBytes: Int64(cap)).admit(framedBytes: framed, pendingBytes: state.pending.bytes, in: state.table) {
                case .admitted: break
                case .admittedCancellingRewrite: state.cancelRewrite()
                case .refused:
                    throw SpoolError(.full, "the log is at its cap: \(state.table.diskBytes) bytes on disk and \(state.pending.bytes) pending, Configuration.maxBytes is \(cap) (policy rejectNew)", path: directory)
                }
            }
            if state.pending.bytes + framed <= configuration.maxPendingBytes { break }
            wakeForWork()
            lock.progressWait()
        }
        // Opening refuses every stored seq past the ceiling, so only 2^62 appends get here;
        // should they, the log is full, which an append says rather than trapping on overflow.
        guard state.nextSeq < Format.seqCeiling else {
            throw SpoolError(.full, "every seq below the format's ceiling (\(Format.seqCeiling)) is taken: no record can be appended", path: directory)
        }
        // A block seals once it reaches `blockSize`, and one record at the size limit that would
        // take it past the format's bound on a block's raw length starts a block. The writer
        // starts the linger clock; while it gathers a group it wakes by itself.
        let (seq, wake, filled) = state.append(payload, timestamp: timestamp, now: monotonicNanos())
        // A block this append filled is sealed on another core while the writer writes the
        // ones before it (`Configuration.sealingThreads`).
        if let filled, let sealAhead = writer.sealAhead { sealAhead.offer(filled) }
        if wake { wakeForWork() }
        return seq
    }
}
