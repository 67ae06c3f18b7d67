import Foundation

extension Process {
    /// Waits for the process to end by itself, looking every 50 ms, for at most `limit`; past
    /// it, stops the process (SIGTERM) and waits for that.
    ///
    /// - Returns: whether it ended by itself within `limit`.
    package func endsByItself(within limit: Duration) async -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now + limit
        while isRunning, clock.now < deadline {
            try? await Task.sleep(for: .milliseconds(50))
        }
        let ended = !isRunning
        if !ended { terminate() }
        waitUntilExit()
        return ended
    }
}
