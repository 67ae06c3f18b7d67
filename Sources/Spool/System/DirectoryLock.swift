import SystemPackage
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The writer's lock on a log directory: an exclusive `flock` on `LOCK`, held while an
/// ``EventLog`` is open. One writer per log, in this process or another. Readers
/// (``LogSnapshot``) never hold it: they only look, for an instant, whether a writer does
/// (``writerIsLive(directory:)``), so neither blocks the other. ``release()`` closes the
/// descriptor once, however often it is called.
final class DirectoryLock: Sendable {
    private let fd: RankedMutex<Int32>
    let path: String

    /// How long an open waits for `LOCK` while it is held only for a reader's instant look.
    static let readerProbeGrace: Duration = .milliseconds(200)

    /// Takes the exclusive lock, creating `LOCK` if needed. A lock held by another writer
    /// fails at once with `.locked`, after at most ``readerProbeGrace`` (the time a reader
    /// holds it to look).
    convenience init(directory: String, permissions: UInt16) throws {
        try self.init(file: directory + "/" + Format.lockFileName, permissions: permissions,
                      whenHeld: SpoolError(.locked, "the log is open for writing elsewhere (in this process or another); close it there first", path: directory))
    }

    /// The lock of one consumer's committer (`consumers/<name>.lock`): one process at a time
    /// reads and commits a consumer, whether it writes the log or not.
    convenience init(consumer name: String, logDirectory: String, permissions: UInt16) throws {
        try self.init(file: Consumers.directory(of: logDirectory) + "/" + name + Format.consumerLockSuffix, permissions: permissions,
                      whenHeld: SpoolError(.locked, "consumer \(name) is in use by another committer (in this process or another); stop it there first", path: logDirectory))
    }

    /// Takes the exclusive lock on `path`, creating it if needed; `held` is thrown when another
    /// holder keeps it past ``readerProbeGrace``.
    private init(file path: String, permissions: UInt16, whenHeld held: SpoolError) throws {
        self.path = path
        self.permissions = permissions
        self.held = held
        self.fd = RankedMutex(.descriptor, try Self.take(path, permissions: permissions, whenHeld: held))
    }

    private let permissions: UInt16
    private let held: SpoolError

    /// Takes the lock again after ``release()`` (``EventLog/resume()``); a no-op while held.
    /// - Throws: as the initializer: `.locked` if another holder has it now.
    func reacquire() throws {
        try fd.withLock { fd in
            guard fd < 0 else { return }
            fd = try Self.take(path, permissions: permissions, whenHeld: held)
        }
    }

    /// Opens `path` and takes its exclusive `flock`: the descriptor, which holds the lock.
    private static func take(_ path: String, permissions: UInt16, whenHeld held: SpoolError) throws -> Int32 {
        // Non-blocking: a FIFO named like the lock must not make opening wait for a writer for ever.
        let fd = Self.openFile(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW, permissions)
        guard fd >= 0 else {
            throw errno == ELOOP ? SpoolError.symbolicLink(path) : SpoolError.system("open lock file", path: path, Errno(rawValue: errno))
        }
        let clock = ContinuousClock()
        let giveUp = clock.now.advanced(by: Self.readerProbeGrace)
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let error = Errno(rawValue: errno)
            if error == .interrupted { continue }
            if error == .wouldBlock && clock.now < giveUp {
                // A reader's look holds a shared lock for microseconds; a writer holds it for good.
                usleep(1_000)
                continue
            }
            close(fd)
            if error == .wouldBlock { throw held }
            throw SpoolError.system("flock", path: path, error)
        }
        return fd
    }

    /// Whether a writer holds the lock of the log in `directory` now: a shared lock taken and
    /// released at once (never waited for). No `LOCK` file means no writer ever opened the
    /// log; nothing is created. A `LOCK` that cannot be opened (another user's, say) counts as
    /// held: the reader then treats the tail as live, which is never wrong, only cautious.
    static func writerIsLive(directory: String) -> Bool {
        isHeld(directory + "/" + Format.lockFileName)
    }

    /// Whether a committer (a ``DetachedConsumer``, in any process) holds consumer `name`'s
    /// lock now, by the same look as ``writerIsLive(directory:)``.
    static func committerIsLive(consumer name: String, logDirectory: String) -> Bool {
        isHeld(Consumers.directory(of: logDirectory) + "/" + name + Format.consumerLockSuffix)
    }

    private static func isHeld(_ path: String) -> Bool {
        let fd = openFile(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW, 0)
        guard fd >= 0 else { return errno != ENOENT }
        defer { close(fd) }
        while flock(fd, LOCK_SH | LOCK_NB) != 0 {
            if errno == EINTR { continue }
            return true
        }
        flock(fd, LOCK_UN)
        return false
    }

    /// `open(2)` behind the file layer's test seam (an armed `.open` fault sets `errno`).
    private static func openFile(_ path: String, _ flags: Int32, _ permissions: UInt16) -> Int32 {
        if case .error(let error) = FaultInjection.check(.open, path: path) {
            errno = error.rawValue
            return -1
        }
        return open(path, flags, mode_t(permissions))
    }

    func release() {
        fd.withLock { fd in
            guard fd >= 0 else { return }
            flock(fd, LOCK_UN)
            close(fd)
            fd = -1
        }
    }
}
