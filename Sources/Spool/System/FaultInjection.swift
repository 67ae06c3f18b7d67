#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization
import SystemPackage

/// The test seam of the file layer: lets tests make chosen system calls fail for files
/// under one directory (`EIO`, `ENOSPC`, short writes), without mocking anything else.
///
/// Faults are armed per directory prefix so tests running in parallel do not disturb
/// each other. With nothing armed, the cost is one relaxed atomic load per call.
public enum FaultInjection {
    /// The system calls a fault can be armed on.
    public enum Operation: Sendable, Hashable {
        /// Writing a file (`pwrite`).
        case write
        /// Making a file durable (`fdatasync`, or `F_FULLFSYNC` on Apple platforms), or a
        /// directory's entries (`fsync` on the directory).
        case sync
        /// Opening a file or directory.
        case open
        /// Renaming a file (the path armed is the new name).
        case rename
        /// Reading a file (`pread`).
        case read
        /// Cutting a file to a size (`ftruncate`).
        case truncate
    }

    /// What the armed call does instead of its work.
    public enum Fault: Sendable, Hashable {
        /// The call fails with this error.
        case error(Errno)
        /// A write stores only this many bytes, then the next write call fails with `ENOSPC`.
        case shortWrite(Int)
        /// A write or sync waits this long, then does its work: a slow or stalled disk (other
        /// operations ignore it). The thread that made the call is blocked meanwhile.
        case delay(Duration)
        /// A sync waits at the gate until the test releases it, then does its work or fails
        /// as the release says (other operations ignore it): a schedule chosen by hand.
        case hold(FaultGate)
    }

    struct Rule {
        var prefix: String
        var operation: Operation
        var skip: Int
        var remaining: Int
        var fault: Fault
    }

    private static let armed = Atomic<Bool>(false)
    private static let rules = RankedMutex<[Rule]>(.faultInjection, [])

    /// Arms `fault` on the `operation` calls for files under `directory`: the first `after`
    /// matching calls succeed, the next `times` fail.
    public static func arm(_ operation: Operation, under directory: String, after: Int = 0, times: Int = 1, fault: Fault) {
        rules.withLock { $0.append(Rule(prefix: directory, operation: operation, skip: after, remaining: times, fault: fault)) }
        armed.store(true, ordering: .releasing)
    }

    /// Removes every fault armed for files under `directory`.
    public static func disarm(under directory: String) {
        rules.withLock { list in
            list.removeAll { $0.prefix == directory }
            armed.store(!list.isEmpty, ordering: .releasing)
        }
    }

    /// The fault to apply to this call, if one is armed and due.
    @inline(__always)
    static func check(_ operation: Operation, path: String) -> Fault? {
        guard armed.load(ordering: .acquiring) else { return nil }
        return rules.withLock { list in
            for index in list.indices where list[index].operation == operation && path.hasPrefix(list[index].prefix) {
                if list[index].skip > 0 {
                    list[index].skip -= 1
                    return nil
                }
                guard list[index].remaining > 0 else { continue }
                list[index].remaining -= 1
                return list[index].fault
            }
            return nil
        }
    }
}

/// Where an armed sync (``FaultInjection/Fault/hold(_:)``) waits until a test releases it:
/// lets a test choose the order in which the log's syncs end, and see what the log does
/// while one is held. Thread-safe; compared by identity.
public final class FaultGate: Sendable, Hashable {
    private struct State {
        var arrived = 0
        var released: [Errno?] = []
    }
    private let state = Mutex(State())

    /// A gate no call has reached yet.
    public init() {}

    /// How many calls have reached the gate so far (released or not).
    public var arrivals: Int { state.withLock { $0.arrived } }

    /// Lets the oldest held call go on: it does its work, or fails with `errno`. A release
    /// before any call arrived lets the next one through at once.
    public func release(failingWith errno: Errno? = nil) {
        state.withLock { $0.released.append(errno) }
    }

    /// The held call's side: counts its arrival, then waits (polling: a test's schedule, not a
    /// hot path) until released; returns the error to fail with, if any.
    func pass() -> Errno? {
        state.withLock { $0.arrived += 1 }
        while true {
            let outcome: Errno?? = state.withLock { $0.released.isEmpty ? nil : .some($0.released.removeFirst()) }
            if let outcome { return outcome }
            usleep(200)
        }
    }

    /// Two gates are equal when they are the same gate.
    public static func == (lhs: FaultGate, rhs: FaultGate) -> Bool { lhs === rhs }
    /// Hashes the gate's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

// MARK: - Sync tracking, for simulated power loss

extension FaultInjection {
    /// What a power loss would leave under a tracked directory, as far as Spool made it durable:
    /// each file's size (and, for small files, its bytes) at its last successful `fdatasync`, by
    /// inode; and each directory's entries (name → inode) at its last successful `fsync`.
    /// Tests truncate files to these sizes and drop entries that were never made durable.
    public struct DurableState: Sendable {
        /// What was durable of one file.
        public struct File: Sendable {
            /// The file's size when it was last synced.
            public var size: Int64
            /// Its bytes then, when it was at most ``FaultInjection/snapshotLimit`` bytes (offset
            /// files, META: these are overwritten in place, so a size is not enough), or always
            /// when the directory is tracked with `wholeFiles`.
            public var bytes: [UInt8]?
        }
        /// Synced files, by inode number.
        public var files: [UInt64: File] = [:]
        /// Synced directories, by path: their durable entries, name → inode number.
        public var directories: [String: [String: UInt64]] = [:]
        /// Whether every file's bytes are recorded at each sync, whatever its size (for a
        /// page-by-page power loss, which needs each page's durable content).
        public var recordsWholeFiles = false
    }

    /// Files up to this size have their bytes recorded at each sync.
    public static let snapshotLimit = 4096

    private static let tracking = Atomic<Bool>(false)
    private static let trackers = RankedMutex<[String: DurableState]>(.faultInjection, [:])

    /// Starts recording what each successful sync under `directory` makes durable; with
    /// `wholeFiles`, the bytes of every file synced, not only of small ones.
    public static func trackSyncs(under directory: String, wholeFiles: Bool = false) {
        var state = DurableState()
        state.recordsWholeFiles = wholeFiles
        trackers.withLock { $0[directory] = state }
        tracking.store(true, ordering: .releasing)
    }

    /// What is durable under `directory` now (nil if it is not tracked).
    public static func durableState(under directory: String) -> DurableState? {
        trackers.withLock { $0[directory] }
    }

    /// Stops tracking `directory` and forgets what was recorded.
    public static func stopTracking(under directory: String) {
        trackers.withLock { list in
            list[directory] = nil
            tracking.store(!list.isEmpty, ordering: .releasing)
        }
    }

    /// Whether syncs of `path` are being recorded.
    @inline(__always)
    static func isTracked(_ path: String) -> Bool {
        guard tracking.load(ordering: .acquiring) else { return false }
        return trackers.withLock { $0.keys.contains { path.hasPrefix($0) } }
    }

    /// Whether a sync of the file at `path`, `size` bytes long, records its bytes.
    static func recordsBytes(of path: String, size: Int) -> Bool {
        size <= snapshotLimit || trackers.withLock { list in list.contains { path.hasPrefix($0.key) && $0.value.recordsWholeFiles } }
    }

    /// Records a successful `fdatasync` of the file at `path`.
    static func recordFileSync(path: String, inode: UInt64, size: Int64, bytes: [UInt8]?) {
        trackers.withLock { list in
            for key in list.keys where path.hasPrefix(key) {
                list[key]!.files[inode] = DurableState.File(size: size, bytes: bytes)
            }
        }
    }

    /// Records a successful `fsync` of the directory at `path`, whose entries are now `entries`.
    static func recordDirectorySync(path: String, entries: [String: UInt64]) {
        trackers.withLock { list in
            for key in list.keys where path.hasPrefix(key) {
                list[key]!.directories[path] = entries
            }
        }
    }
}
