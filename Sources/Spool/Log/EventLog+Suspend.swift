import Foundation

extension EventLog {
    /// Lets go of every lock and file the log holds, keeping everything appended: for a
    /// process about to be suspended (an iOS app entering the background, an extension whose
    /// work is done), which the system kills if it holds a file lock in a shared container
    /// (`0xdead10cc`).
    ///
    /// In order: new appends are refused (with `.suspended`); every record appended so far is
    /// written and made durable (one `fdatasync`, as ``syncBlocking()``); then the active
    /// segment is closed, the log's own consumers (``consumer(named:)``) are closed and their
    /// locks released, and the directory lock is released. The writer thread stays, parked,
    /// holding nothing. Afterwards another process may open the log, or a ``DetachedConsumer``
    /// read it; ``resume()`` takes it back.
    ///
    /// Suspending a suspended log does nothing. Blocking (an `fdatasync`): call it from a
    /// background task's thread, not Swift's cooperative pool. Readers (``LogReader``,
    /// ``LogFollower``) hold no lock; end them yourself if you want their descriptors closed.
    /// - Throws: the write error (`.diskFull`, `.io`, `.failed`) if pending records could not
    ///   be made durable: the log then stays open, holding its lock, and takes appends again;
    ///   `.closed` once closed.
    public func suspend() throws {
        try suspend(onlyIfIdle: false)
    }

    /// ``suspend()``; with `onlyIfIdle` (an idle suspension), only if nothing is pending as it
    /// begins (`LogState.beginSuspend(onlyIfIdle:)`).
    func suspend(onlyIfIdle: Bool) throws {
        lifecycle.lock()
        defer { lifecycle.unlock() }
        let target = try lock.withLock { try state.beginSuspend(onlyIfIdle: onlyIfIdle) }
        guard let target else { return }
        do {
            try waitUntilBlocking(before: target, is: .synced)
        } catch {
            lock.withLock { state.abandonSuspend() }
            throw error
        }
        takeWriteToken(waitingForRetention: true)
        writer.suspend()
        consumerCache.closeAll()
        codec.close()
        directoryLock.release()
        lock.withLock { state.markReleased() }
        releaseWriteToken(resuming: false)
        logger.debug("suspended log", metadata: ["directory": "\(directory)", "nextSeq": "\(target)"])
    }

    /// Takes back what ``suspend()`` let go of: the directory lock, then the active segment,
    /// after checking that no other writer changed the log meanwhile (one directory listing,
    /// one `open` and `fstat`: no recovery scan). Appends are taken again once it returns.
    /// Consumers are made again by ``consumer(named:)``.
    ///
    /// Resuming a log that is not suspended does nothing. Blocking, but short (well under a
    /// millisecond on a local disk).
    /// - Throws: `.locked` if another writer holds the log now, or changed it while this one
    ///   was suspended (close this `EventLog` and open the log again: opening recovers what the
    ///   other writer left); the log then stays suspended. `.io` if a file cannot be opened;
    ///   `.closed` once closed.
    public func resume() throws {
        lifecycle.lock()
        defer { lifecycle.unlock() }
        let suspended = try lock.withLock {
            if state.status.closeRequested { throw SpoolError(.closed, "the log is closed", path: directory) }
            return state.status.suspendingOrSuspended
        }
        guard suspended else { return }
        takeWriteToken(waitingForRetention: false)
        do {
            try directoryLock.reacquire()
            do {
                try writer.resume(known: lock.withLock { state.table.segments })
            } catch {
                directoryLock.release()
                throw error
            }
        } catch {
            releaseWriteToken(resuming: false)
            throw error
        }
        releaseWriteToken(resuming: true)
    }

    /// Whether the log is suspended (``suspend()``): it holds no lock and no file, and
    /// refuses appends until ``resume()``.
    public var isSuspended: Bool { lock.withLock { state.status.isSuspended } }

    /// Waits until no one writes (and, when asked, no retention deletes), then holds the write
    /// token, so that only the caller touches the segment writer.
    private func takeWriteToken(waitingForRetention: Bool) {
        lock.withLock {
            while !state.takeWriteToken(waitingForRetention: waitingForRetention) { lock.progressWait() }
        }
    }

    private func releaseWriteToken(resuming: Bool) {
        lock.withLock {
            state.releaseWriteToken(resuming: resuming)
            // Resumed while idle-suspending: the writer looks again whether it is idle, so a
            // resume that no append follows does not keep the lock.
            if state.group.writerAwaitsToken || (resuming && configuration.suspendsWhenIdle) { lock.wakeWriter() }
            lock.broadcastProgress()
        }
    }

    /// `Configuration.suspendsWhenIdle`: the writer found nothing to do, so the log suspends
    /// itself on its lifecycle queue, unless it is suspended already or something is pending or
    /// waited for. Lock held (the writer thread, about to sleep).
    func scheduleIdleSuspensionIfIdle() {
        guard configuration.suspendsWhenIdle, state.queueIdleSuspension() else { return }
        lifecycleQueue.async { [self] in
            do {
                // Appends that came meanwhile keep it open: the writer looks again once they are written.
                try suspend(onlyIfIdle: true)
            } catch {
                logger.warning("could not suspend the idle log; it holds its lock until the next idle spell", metadata: ["error": "\(error)"])
            }
        }
    }
}
