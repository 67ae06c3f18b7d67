import Foundation
import Testing
@testable import spool

/// The crash tester's own safety nets, against real processes: a child that stops taking input,
/// or a reader that never ends, is killed and reported hung; a child that ends in time is not.
/// The hanging children sleep 5 s: a watchdog that failed to fire fails the test, not hangs it.
@Suite struct WatchdogTests {
    @Test func aChildThatStopsTakingInputIsKilledAndReportedHung() throws {
        let child = ChildProcess(executable: "/bin/sleep", arguments: ["5"])
        try child.start()
        child.startWatchdog(seconds: 0.3)
        let (_, reason, lines) = child.finish()
        #expect(child.hung)
        #expect(reason == .uncaughtSignal)
        #expect(lines.isEmpty)
    }

    @Test func aChildThatEndsInTimeIsNotReportedHungWhenTheWatchdogFiresLater() throws {
        let child = ChildProcess(executable: "/bin/cat", arguments: [])
        try child.start()
        child.startWatchdog(seconds: 0.5)
        #expect(child.write(Data("a\nb\n".utf8)))
        child.closeInput()
        let (status, reason, lines) = child.finish()
        // The watchdog fires after the child was reaped: it must neither mark it hung nor
        // signal whatever process has its pid by then.
        Thread.sleep(forTimeInterval: 1)
        #expect(status == 0 && reason == .exit)
        #expect(lines == ["a", "b"])
        #expect(!child.hung)
    }

    @Test func aReaderThatNeverEndsIsKilledAtItsLimit() throws {
        let scratch = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        let hung = try ChildRun.run("/bin/sleep", ["5"], scratch: scratch, hangAfter: 0.3)
        #expect(hung.hung && hung.signaled)
        let done = try ChildRun.run("/bin/echo", ["done"], scratch: scratch, hangAfter: 60)
        #expect(!done.hung && !done.signaled && done.status == 0)
        #expect(done.stdout == "done\n")
    }
}
