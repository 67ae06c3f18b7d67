import SystemPackage
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How a follower waits: a pipe that ``signal()`` and ``stop()`` write to, and on Linux an
/// inotify descriptor watching the log's directory (every change to a file in it: a write, a
/// new segment, a deletion).
final class Wakeup: Sendable {
    private let pipeRead: Int32
    private let pipeWrite: Int32
    private let inotify: Int32
    private let stopped = Atomic(false)
    private let closed = RankedMutex(.descriptor, false)

    init(watching directory: String?) throws {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw SpoolError.system("pipe", path: nil, Errno(rawValue: errno)) }
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        pipeRead = fds[0]
        pipeWrite = fds[1]
        #if os(Linux)
        if let directory {
            let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
            let events = UInt32(IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_CLOSE_WRITE)
            if fd >= 0 && inotify_add_watch(fd, directory, events) < 0 {
                close(fd)
                inotify = -1
            } else {
                inotify = fd  // -1 (out of inotify instances): polling instead
            }
        } else {
            inotify = -1
        }
        #else
        inotify = -1
        #endif
        polling = directory != nil && inotify < 0
    }

    /// Whether waits time out at ``LogFollower/pollInterval`` (no inotify for a directory).
    private let polling: Bool

    var isStopped: Bool { stopped.load(ordering: .acquiring) }

    /// Set by ``signal()``, cleared by ``drain()``: one byte in the pipe per wake-up, not one
    /// per write the writer makes while the follower reads.
    private let signalled = Atomic(false)

    /// Wakes a waiting follower (the in-process writer's observer, after each batch it writes).
    func signal() {
        guard !signalled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var byte: UInt8 = 1
        _ = write(pipeWrite, &byte, 1)  // a full pipe is already a pending wake-up
    }

    func stop() {
        stopped.store(true, ordering: .releasing)
        var byte: UInt8 = 1
        _ = write(pipeWrite, &byte, 1)  // always: a stop must wake a wait whatever was signalled
    }

    /// Empties both descriptors, so the next wait sleeps until something new happens.
    func drain() {
        // Cleared before the pipe is emptied: a signal after this writes a byte again.
        signalled.store(false, ordering: .releasing)
        withUnsafeTemporaryAllocation(byteCount: 4096, alignment: 8) { buffer in
            for fd in [pipeRead, inotify] where fd >= 0 {
                while read(fd, buffer.baseAddress, buffer.count) > 0 {}
            }
        }
    }

    /// Sleeps until a signal, a change in the directory, or the recheck interval.
    func wait() {
        let interval = polling ? LogFollower.pollInterval : LogFollower.idleRecheck
        let milliseconds = Int32(interval.wholeNanoseconds / 1_000_000)
        var fds = [pollfd(fd: pipeRead, events: Int16(POLLIN), revents: 0)]
        if inotify >= 0 { fds.append(pollfd(fd: inotify, events: Int16(POLLIN), revents: 0)) }
        _ = poll(&fds, nfds_t(fds.count), milliseconds)
    }

    func release() {
        closed.withLock { closed in
            guard !closed else { return }
            closed = true
            for fd in [pipeRead, pipeWrite, inotify] where fd >= 0 { _ = close(fd) }
        }
    }
}
