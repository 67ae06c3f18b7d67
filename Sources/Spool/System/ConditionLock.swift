#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A pthread mutex with three condition variables: one wakes the writer thread, one the
/// pipeline thread (which writes while the writer is in an `fdatasync`), the third wakes
/// callers waiting for progress (blocking appends and backpressure).
///
/// Separate conditions because a `signal` meant for one thread must never be swallowed by
/// another waiting one. Thread-safe; all waits are on plain threads, never on the cooperative pool
/// (the async API uses continuations instead).
final class ConditionLock: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let writerCondition: UnsafeMutablePointer<pthread_cond_t>
    private let progressCondition: UnsafeMutablePointer<pthread_cond_t>
    private let pipelineCondition: UnsafeMutablePointer<pthread_cond_t>

    init() {
        mutex = .allocate(capacity: 1)
        writerCondition = .allocate(capacity: 1)
        progressCondition = .allocate(capacity: 1)
        pipelineCondition = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        #if os(Linux)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        #endif
        pthread_cond_init(writerCondition, &attributes)
        pthread_cond_init(progressCondition, &attributes)
        pthread_cond_init(pipelineCondition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(writerCondition)
        pthread_cond_destroy(progressCondition)
        pthread_cond_destroy(pipelineCondition)
        pthread_mutex_destroy(mutex)
        writerCondition.deallocate()
        progressCondition.deallocate()
        pipelineCondition.deallocate()
        mutex.deallocate()
    }

    /// Takes the lock, checking its rank (``LockRank/log``) in debug builds.
    @inline(__always) func lock() {
        LockOrder.willTake(.log, self)
        pthread_mutex_lock(mutex)
    }

    @inline(__always) func unlock() {
        pthread_mutex_unlock(mutex)
        LockOrder.released(self)
    }

    @inline(__always)
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }

    /// Wakes the writer thread. Call it after changing, under the lock, what the writer waits
    /// for; it may be called once the lock is let go (the writer re-checks its state under the
    /// lock before it waits, so no wake-up is lost), which spares the writer waking into a
    /// held mutex.
    @inline(__always) func wakeWriter() { pthread_cond_signal(writerCondition) }
    /// Wakes the pipeline thread, as ``wakeWriter()`` does the writer.
    @inline(__always) func wakePipeline() { pthread_cond_signal(pipelineCondition) }
    /// Wakes every caller waiting for progress. Call with the lock held.
    @inline(__always) func broadcastProgress() { pthread_cond_broadcast(progressCondition) }

    /// The writer waits, with the lock held, until woken or until `deadline` (monotonic ns), if any.
    func writerWait(until deadline: UInt64?) {
        wait(writerCondition, until: deadline)
    }

    /// The pipeline thread waits, with the lock held, until woken.
    func pipelineWait() {
        wait(pipelineCondition, until: nil)
    }

    /// A caller waits, with the lock held, until progress is broadcast (or until `deadline`,
    /// monotonic ns, if any).
    func progressWait(until deadline: UInt64? = nil) {
        wait(progressCondition, until: deadline)
    }

    private func wait(_ condition: UnsafeMutablePointer<pthread_cond_t>, until deadline: UInt64?) {
        guard let deadline else {
            pthread_cond_wait(condition, mutex)
            return
        }
        #if os(Linux)
        var time = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        #else
        let remaining = deadline > monotonicNanos() ? deadline - monotonicNanos() : 0
        let wall = wallClockNanos() + remaining
        var time = timespec(tv_sec: Int(wall / 1_000_000_000), tv_nsec: Int(wall % 1_000_000_000))
        #endif
        pthread_cond_timedwait(condition, mutex, &time)
    }
}

/// Nanoseconds on the monotonic clock.
@inline(__always)
func monotonicNanos() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// Nanoseconds since the Unix epoch on the wall clock.
@inline(__always)
func wallClockNanos() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_REALTIME, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// Milliseconds since the Unix epoch on the wall clock: a record's timestamp.
@inline(__always)
func wallClockMillis() -> Int64 {
    Int64(wallClockNanos() / 1_000_000)
}
