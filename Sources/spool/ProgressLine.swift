import ArgumentParser
import Foundation
import Spool
import Synchronization

/// `--progress`, for the commands that show progress on long work (`sync --once`, `verify`,
/// `crash-test`).
struct ProgressOption: ParsableArguments {
    @Flag(help: "Print a progress line on standard error every few seconds even when it is not a terminal (on a terminal, a live line is always shown).")
    var progress = false

    /// The progress line of work of `total` `unit`s.
    func line(_ label: String, unit: String, total: UInt64) -> ProgressLine {
        ProgressLine(label, unit: unit, total: total, mode: ProgressLine.Mode(forced: progress))
    }
}

/// Progress of long work on standard error, as `pv` and `rsync --info=progress2` show it: done
/// / total, the rate, and the time left.
///
/// On a terminal it is one live line, redrawn at most ``liveInterval`` apart and erased by
/// ``finish()`` so the summary takes its place. Elsewhere (a file, a pipe, the journal) nothing
/// is shown unless `--progress` asks for a plain line every ``plainInterval``. Thread-safe: any
/// thread may call it.
final class ProgressLine: Sendable {
    enum Mode: Sendable {
        /// A line redrawn in place (stderr is a terminal).
        case live
        /// Plain lines, one every few seconds (`--progress` without a terminal).
        case plain
        /// Nothing.
        case off

        /// Live on a terminal; plain with `forced` elsewhere; else off.
        init(forced: Bool) {
            self = isatty(2) == 1 ? .live : forced ? .plain : .off
        }
    }

    /// The shortest time between two redraws of the live line.
    static let liveInterval: Duration = .milliseconds(250)
    /// The time between two plain lines.
    static let plainInterval: Duration = .seconds(2)

    private struct State {
        var shownAt: ContinuousClock.Instant?
        var drawn = false
        var total: UInt64
    }

    let label: String
    let unit: String
    let mode: Mode
    private let started = ContinuousClock.now
    private let state: Mutex<State>

    init(_ label: String, unit: String, total: UInt64, mode: Mode) {
        self.label = label
        self.unit = unit
        self.mode = mode
        state = Mutex(State(total: total))
    }

    /// Says that `done` of the total are done; shown now if the last line is old enough (the
    /// first update is shown at once).
    func update(_ done: UInt64) {
        guard mode != .off else { return }
        let now = ContinuousClock.now
        let text: String? = state.withLock { state in
            let interval = mode == .live ? Self.liveInterval : Self.plainInterval
            if let shown = state.shownAt, now - shown < interval { return nil }
            state.shownAt = now
            let line = describe(done: done, total: state.total, elapsed: now - started)
            if mode == .plain { return line + "\n" }
            state.drawn = true
            return "\r" + line + "\u{1B}[K"
        }
        if let text { Self.writeError(text) }
    }

    /// Erases the live line (the summary, or a message, is printed in its place; the next
    /// update draws it again below). Nothing for plain lines.
    func clear() {
        guard mode == .live else { return }
        let drawn = state.withLock { state in
            defer { state.drawn = false }
            return state.drawn
        }
        if drawn { Self.writeError("\r\u{1B}[K") }
    }

    /// The work is over: erases the live line.
    func finish() { clear() }

    /// `label: done / total unit (p%), rate unit/s, time left`.
    private func describe(done: UInt64, total: UInt64, elapsed: Duration) -> String {
        let seconds = elapsed.seconds
        let rate = seconds > 0 ? Double(done) / seconds : 0
        var text = "\(label): \(done) / \(total) \(unit)"
        if total > 0 { text += " (\(min(100, done * 100 / total))%)" }
        text += ", " + (rate >= 10 ? "\(Int(rate))" : String(format: "%.1f", rate)) + " \(unit)/s"
        if rate > 0, total > done { text += ", " + Self.duration(Double(total - done) / rate) + " left" }
        return text
    }

    /// `42s`, `3m07s`, `2h05m`.
    static func duration(_ seconds: Double) -> String {
        let whole = Int(min(seconds.rounded(.up), 360_000_000))
        if whole < 60 { return "\(whole)s" }
        if whole < 3600 { return String(format: "%dm%02ds", whole / 60, whole % 60) }
        return String(format: "%dh%02dm", whole / 3600, whole % 3600 / 60)
    }

    /// One `write` to standard error (no newline added, unlike ``Output/error(_:)``).
    private static func writeError(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }
}
