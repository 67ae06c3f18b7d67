import Foundation

extension Process {
    /// Waits for the process to end by itself, looking every 50 ms, for at most `limit`; past
    /// it, stops the process (``stop(within:)``).
    ///
    /// - Returns: whether it ended by itself within `limit`.
    package func endsByItself(within limit: Duration) async -> Bool {
        let ended = await exits(within: limit)
        if !ended { await stop(within: .seconds(5)) }
        return ended
    }

    /// Stops the process: SIGTERM, then, if it is still running `limit` later, SIGKILL (which
    /// cannot be blocked or caught), and waits for that. Never waits without a bound: a child
    /// started through Foundation's `Process` inherits the starting thread's signal mask, which
    /// can hold SIGTERM blocked, and a `waitUntilExit()` after `terminate()` then never returns.
    ///
    /// - Returns: whether SIGTERM stopped it.
    @discardableResult
    package func stop(within limit: Duration) async -> Bool {
        if isRunning { terminate() }
        if await exits(within: limit) { return true }
        kill(processIdentifier, SIGKILL)
        _ = await exits(within: limit)
        return false
    }

    /// Whether the process has exited within `limit`, looking every 20 ms.
    private func exits(within limit: Duration) async -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now + limit
        while isRunning, clock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        return !isRunning
    }
}
