/// Where the log is in its life: one value, so that no combination of flags can say two
/// things at once.
///
///     open ⇄ stalled                      (a write fails / a retry succeeds)
///     open → suspending → suspended → open (suspend(), resume(); a failed flush goes back)
///     open, stalled, suspending, suspended → closing → closed
///     any but closed → failed              (an fdatasync failed) → closed
///
/// Who holds the write token (the writer thread, the pipeline thread, a blocking caller
/// writing its own record, `suspend()`/`resume()`) and whether an `fdatasync` is in flight (the
/// sync token) are kept beside it (``LogState/group``): a log is
/// written while open, stalled (the retry), suspending (the flush) and closing (the last write).
enum LogStatus {
    /// Taking appends.
    case open
    /// A write failed (`ENOSPC`, `EIO`, ...): the blocks stay pending and the writer retries;
    /// new appends are refused with the error until a retry succeeds.
    case stalled(SpoolError)
    /// ``EventLog/suspend()`` refuses appends and makes what is pending durable.
    case suspending
    /// ``EventLog/suspend()`` released the log's files and lock; ``EventLog/resume()`` takes
    /// them back.
    case suspended
    /// An `fsync` failed: the data it covered cannot be trusted. Writes are refused until
    /// reopen. `closing`: `close()` was called (the writer then exits).
    case failed(SpoolError, closing: Bool)
    /// `close()` was called: the writer writes what is pending, then exits.
    case closing
    /// The writer exited. `finished`: `close()` released the files and the directory lock
    /// (other callers of `close()` wait for it).
    case closed(finished: Bool)
}

extension LogStatus {
    /// `close()` was called (the status may be `.failed`).
    var closeRequested: Bool {
        switch self {
        case .closing, .closed, .failed(_, closing: true): true
        case .open, .stalled, .suspending, .suspended, .failed(_, closing: false): false
        }
    }
    /// `close()` released the files and the directory lock.
    var closeFinished: Bool {
        if case .closed(finished: true) = self { return true }
        return false
    }
    /// Taking appends: ``error`` is nil (the append path asks this first: it builds no error).
    var isOpen: Bool {
        if case .open = self { return true }
        return false
    }
    /// ``EventLog/suspend()`` refuses appends (it flushes, or has released the files).
    var suspendingOrSuspended: Bool {
        switch self {
        case .suspending, .suspended: true
        default: false
        }
    }
    /// ``EventLog/suspend()`` released the files and the lock: what `EventLog.isSuspended` reports.
    var isSuspended: Bool {
        if case .suspended = self { return true }
        return false
    }
    /// `close()` was called or the log is suspending or suspended: nothing may touch the log's
    /// files but what `close()`/`suspend()`/`resume()` itself does (retention stops).
    var filesReleased: Bool { closeRequested || suspendingOrSuspended }
    /// Whether the writer may write now, as far as the lifecycle goes: open, suspending (the
    /// flush) or suspended (nothing is pending then). Not while stalled (the writer's retry
    /// waits for its time) nor failed, closing or closed.
    var acceptsWrites: Bool {
        switch self {
        case .open, .suspending, .suspended: true
        default: false
        }
    }
    /// An `fdatasync` failed: the log refuses writes until reopen.
    var isFailed: Bool {
        if case .failed = self { return true }
        return false
    }
    /// Whether the status is `.closing`.
    var isClosing: Bool {
        if case .closing = self { return true }
        return false
    }

    /// The files are held and nothing failed for good: sealed segments may be rewritten.
    var rewritesAllowed: Bool { !filesReleased && !isFailed }

    /// The error an append gets in this status, nil while open.
    var error: SpoolError? {
        switch self {
        case .stalled(let error): return error
        case .failed(let error, _):
            // Not the fsync's own code: `diskFull` would promise that appending works again
            // once space returns, and a failed fsync is never retried.
            return SpoolError(.failed, "an fdatasync failed (\(error.message)); the log refuses writes until it is reopened",
                              path: error.path, errno: error.errno)
        case .closing, .closed: return SpoolError(.closed, "the log is closed")
        case .suspending, .suspended:
            return SpoolError(.suspended, "the log is suspended (it holds no lock and no file); call resume() before appending")
        case .open: return nil
        }
    }
}
