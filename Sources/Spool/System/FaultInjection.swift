import Synchronization
import SystemPackage

/// The test seam of the file layer: lets tests make chosen system calls fail for files
/// under one directory (`EIO`, `ENOSPC`, short writes), without mocking anything else.
///
/// Faults are armed per directory prefix so tests running in parallel do not disturb
/// each other. With nothing armed, the cost is one relaxed atomic load per call.
public enum FaultInjection {
    /// The system calls a fault can be armed on.
    public enum Operation: Sendable, Hashable { case write, sync, open, rename, read, truncate }

    /// What the armed call does instead of its work.
    public enum Fault: Sendable, Hashable {
        /// The call fails with this error.
        case error(Errno)
        /// A write stores only this many bytes, then the next write call fails with `ENOSPC`.
        case shortWrite(Int)
    }

    struct Rule {
        var prefix: String
        var operation: Operation
        var skip: Int
        var remaining: Int
        var fault: Fault
    }

    private static let armed = Atomic<Bool>(false)
    private static let rules = Mutex<[Rule]>([])

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
