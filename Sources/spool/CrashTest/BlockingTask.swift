import Dispatch
import Synchronization

/// Runs `body` in a task and blocks the calling thread until it ends. For the crash tester's
/// synchronous loop, which runs on a Dispatch thread (see `SpoolCommand.main`), never on the
/// cooperative pool, whose threads the task needs.
func runBlocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let result = Mutex<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task {
        let outcome: Result<T, any Error>
        do { outcome = .success(try await body()) } catch { outcome = .failure(error) }
        result.withLock { $0 = outcome }
        done.signal()
    }
    done.wait()
    return try result.withLock { $0! }.get()
}
