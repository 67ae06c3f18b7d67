#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// The Swift runtime's part of a group-commit cycle, with no log at all: `producers` tasks each
/// suspend on a continuation, a plain thread sleeps until all of them have, then resumes them
/// all, again and again. Each round trip is what a synced append costs above its I/O when the
/// writer does nothing: a continuation resumed, a task scheduled on the pool, a lock taken,
/// one wake-up of one thread per group. Returns the rate of task round trips.
package func groupRoundTrip(producers: Int, budget: Budget) async -> Run {
    let rendezvous = Rendezvous(group: producers)
    let ticket = Ticket(limit: budget.events)
    let thread = Thread { rendezvous.serve() }
    thread.stackSize = 1 << 20
    thread.start()
    let start = monotonicNanos()
    let deadline = budget.deadline(from: start)
    let count = await withTaskGroup(of: Int.self) { group in
        for _ in 0..<producers {
            group.addTask {
                var done = 0
                while ticket.take() != nil {
                    await rendezvous.arrive()
                    done += 1
                    if monotonicNanos() > deadline { break }
                }
                rendezvous.leave()
                return done
            }
        }
        return await group.reduce(0, +)
    }
    let nanos = monotonicNanos() - start
    rendezvous.stop()
    return Run(count: count, nanos: nanos)
}

/// Where ``groupRoundTrip(producers:budget:)``'s tasks wait: a mutex, the waiting
/// continuations, and a condition the serving thread sleeps on until a whole group is in.
private final class Rendezvous: @unchecked Sendable {
    // Allocated, not stored properties: a pthread object must not move, and `&property` of a
    // class's stored property is not guaranteed to be its storage.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var waiting: [UnsafeContinuation<Void, Never>] = []
    private var spare: [UnsafeContinuation<Void, Never>] = []
    /// Tasks still taking part: a group is complete when all of them wait.
    private var members: Int
    private var stopped = false

    init(group: Int) {
        members = group
        waiting.reserveCapacity(group)
        spare.reserveCapacity(group)
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    func arrive() async {
        await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
            pthread_mutex_lock(mutex)
            waiting.append(continuation)
            if waiting.count >= members { pthread_cond_signal(condition) }
            pthread_mutex_unlock(mutex)
        }
    }

    /// A task is done: the next groups are one smaller.
    func leave() {
        pthread_mutex_lock(mutex)
        members -= 1
        if members > 0 && waiting.count >= members { pthread_cond_signal(condition) }
        pthread_mutex_unlock(mutex)
    }

    func stop() {
        pthread_mutex_lock(mutex)
        stopped = true
        pthread_cond_signal(condition)
        pthread_mutex_unlock(mutex)
    }

    /// The serving thread: resumes each complete group with the mutex released.
    func serve() {
        pthread_mutex_lock(mutex)
        while !stopped {
            if members == 0 || waiting.count < members {
                pthread_cond_wait(condition, mutex)
                continue
            }
            swap(&waiting, &spare)
            pthread_mutex_unlock(mutex)
            for continuation in spare { continuation.resume() }
            spare.removeAll(keepingCapacity: true)
            pthread_mutex_lock(mutex)
        }
        pthread_mutex_unlock(mutex)
    }
}
