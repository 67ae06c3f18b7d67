#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// Every lock of the storage side with its place in the lock order (`Architecture.md`, "Lock
/// order"): a thread holding a lock may take only locks of a higher rank. Two locks of one rank
/// are never held together.
///
/// In debug builds every ranked lock checks this as it is taken, and traps naming both locks
/// when a thread takes one of a rank at or below a lock it holds, as the Linux kernel's lockdep
/// and Abseil's `Mutex` deadlock detection do: a wrong order is found by the first test that
/// takes the two locks, not by the rare run that deadlocks. Release builds check nothing.
enum LockRank: Int, Comparable, CustomStringConvertible, Sendable {
    /// `EventLog.lifecycle`: `close()`, `suspend()` and `resume()`, one at a time.
    case lifecycle = 10
    /// `LogFollower`'s cursor.
    case followerCursor = 20
    /// A consumer's committer lock (`Committer`): its offset file, offsets and cursor.
    case committer = 30
    /// `ConsumerCache`: the consumers this process made.
    case consumerCache = 40
    /// `LiveSegments.syncedEnd`: what a detached consumer synced.
    case liveSynced = 50
    /// `LiveSegments.refreshing`: one look at the directory at a time.
    case liveRefreshing = 55
    /// `EventLog.capLock`: one making of room under `Configuration.maxBytes` at a time (the
    /// writer's before a write, a cold rewrite's before it grows its file).
    case cap = 57
    /// `EventLog.segmentFiles`: a sealed segment's file is unlinked (retention, the cap) or
    /// replaced by its cold rewrite, one at a time, each checking the shared state first.
    case segmentFiles = 58
    /// `EventLog.lock`: the log's shared state (`LogState`).
    case log = 60
    /// `Recompressor`: whether cold recompression's thread runs, and what it settled (asked
    /// for after a roll, under the log's lock).
    case recompressor = 62
    /// `SealAhead`: the blocks sealing lanes seal ahead of the writer (offered under the log's lock).
    case sealing = 65
    /// `LogCodec`'s training samples.
    case training = 70
    /// `DictionaryStore`'s state.
    case dictionaries = 75
    /// `LiveSegments.state`: the segment list of a log another process writes.
    case liveState = 80
    /// A file lock's descriptor (`DirectoryLock`), and a reader's wake-up (`Wakeup`).
    case descriptor = 85
    /// The fault-injection seam's rules and trackers, consulted by every file operation.
    case faultInjection = 90

    static func < (lhs: LockRank, rhs: LockRank) -> Bool { lhs.rawValue < rhs.rawValue }

    var description: String {
        switch self {
        case .lifecycle: "EventLog.lifecycle"
        case .followerCursor: "LogFollower.cursor"
        case .committer: "Committer.lock"
        case .consumerCache: "ConsumerCache"
        case .liveSynced: "LiveSegments.syncedEnd"
        case .liveRefreshing: "LiveSegments.refreshing"
        case .cap: "EventLog.capLock"
        case .segmentFiles: "EventLog.segmentFiles"
        case .log: "EventLog.lock"
        case .recompressor: "Recompressor"
        case .sealing: "SealAhead"
        case .training: "LogCodec.training"
        case .dictionaries: "DictionaryStore.state"
        case .liveState: "LiveSegments.state"
        case .descriptor: "DirectoryLock/Wakeup descriptor"
        case .faultInjection: "FaultInjection"
        }
    }
}

/// The debug-build check of ``LockRank``: the ranks each thread holds, in a thread-local list.
enum LockOrder {
    #if DEBUG
    /// The locks one thread holds, in the order taken.
    private final class Held {
        var ranks: [(rank: LockRank, lock: ObjectIdentifier)] = []
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let created = pthread_key_create(&key) { pointer in
            #if canImport(Darwin)
            Unmanaged<AnyObject>.fromOpaque(pointer).release()
            #else
            if let pointer { Unmanaged<AnyObject>.fromOpaque(pointer).release() }
            #endif
        }
        precondition(created == 0, "pthread_key_create failed")
        return key
    }()

    private static var held: Held {
        if let pointer = pthread_getspecific(key) {
            return Unmanaged<Held>.fromOpaque(pointer).takeUnretainedValue()
        }
        let held = Held()
        pthread_setspecific(key, Unmanaged.passRetained(held).toOpaque())
        return held
    }
    #endif

    /// Before taking `lock` of `rank`: traps in debug builds if this thread holds a lock of the
    /// same or a higher rank.
    @inline(__always)
    static func willTake(_ rank: LockRank, _ lock: AnyObject) {
        #if DEBUG
        let held = held
        if let worst = held.ranks.max(by: { $0.rank < $1.rank }), worst.rank >= rank {
            preconditionFailure("lock order: taking \(rank) (rank \(rank.rawValue)) while holding \(worst.rank) (rank \(worst.rank.rawValue)); see Architecture.md, \"Lock order\"")
        }
        held.ranks.append((rank, ObjectIdentifier(lock)))
        #endif
    }

    /// After releasing `lock`.
    @inline(__always)
    static func released(_ lock: AnyObject) {
        #if DEBUG
        let held = held
        let id = ObjectIdentifier(lock)
        if let index = held.ranks.lastIndex(where: { $0.lock == id }) { held.ranks.remove(at: index) }
        #endif
    }
}

/// A mutex with a ``LockRank``, checked in debug builds: `EventLog.lifecycle` and a
/// committer's lock.
final class RankedLock: @unchecked Sendable {
    let rank: LockRank
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    init(_ rank: LockRank) {
        self.rank = rank
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func lock() {
        LockOrder.willTake(rank, self)
        pthread_mutex_lock(mutex)
    }

    func unlock() {
        pthread_mutex_unlock(mutex)
        LockOrder.released(self)
    }

    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}

/// `Synchronization.Mutex` with a ``LockRank``, checked in debug builds.
final class RankedMutex<Value>: Sendable {
    let rank: LockRank
    private let mutex: Mutex<Value>

    init(_ rank: LockRank, _ value: sending Value) {
        self.rank = rank
        mutex = Mutex(value)
    }

    func withLock<Result, E: Error>(_ body: (inout sending Value) throws(E) -> sending Result) throws(E) -> sending Result {
        LockOrder.willTake(rank, self)
        defer { LockOrder.released(self) }
        return try mutex.withLock(body)
    }
}
