import Foundation
import Spool

/// Standard input as `spool append` reads it: chunks as they arrive, and a bounded wait for
/// the next one. Blocking; for the one thread that runs the command (never the cooperative pool).
struct StandardInput {
    /// Reads what is available, up to `buffer.count` bytes, waiting for at least one.
    /// - Returns: the number of bytes read; 0 at the end of input.
    /// - Throws: `.io` if the read fails.
    func read(into buffer: inout [UInt8]) throws -> Int {
        while true {
            let n = buffer.withUnsafeMutableBytes { Foundation.read(0, $0.baseAddress, $0.count) }
            if n >= 0 { return n }
            if errno != EINTR { throw SpoolError(.io, "reading standard input failed") }
        }
    }

    /// Waits until input can be read (bytes, or the end of input) or `deadline` passes.
    /// - Returns: whether input can be read now; false once `deadline` passed without any.
    func waitForInput(until deadline: ContinuousClock.Instant) -> Bool {
        var descriptor = pollfd(fd: 0, events: Int16(POLLIN), revents: 0)
        while true {
            let left = ContinuousClock.now.duration(to: deadline)
            // Rounded up to a whole millisecond (poll's unit): never returns before the deadline.
            let milliseconds = left <= .zero ? Int32(0)
                : Int32(clamping: Int64((Double(left.components.seconds) * 1000 + Double(left.components.attoseconds) / 1e15).rounded(.up)))
            let ready = poll(&descriptor, 1, milliseconds)
            if ready > 0 { return true }
            // An error other than an interruption (stdin closed under us): let read() say what it is.
            if ready < 0 && errno != EINTR { return true }
            if ready == 0 && milliseconds == 0 { return false }
            if ready == 0 && ContinuousClock.now >= deadline { return false }
        }
    }
}
