import ArgumentParser
import Foundation

/// The options `spool bench` and Benchmarks' `compare` share: how many runs, and what the run
/// is compared with and written to. One `@OptionGroup`, so both commands read the same
/// baseline files and write the same report.
package struct BenchRunOptions: ParsableArguments {
    /// ``BenchOptions/runs``; nil keeps the options' own.
    @Option(help: "Runs of every measurement, interleaved (default 5; 1 with --quick): each figure is their median, with a 95% percentile-bootstrap interval.")
    package var runs: Int?
    /// ``BenchOptions/warmUp``; nil keeps the options' own.
    @Flag(inversion: .prefixedNo, help: "A thrown-away warm-up run at --quick's sizes first. (default: on; off with --quick)")
    package var warmUp: Bool?
    /// A file for the report's JSON.
    @Option(help: "Also write the figures as JSON to this file.")
    package var json: String?
    /// A directory for the HTML report (``Report/writePage(in:)``).
    @Option(help: "Write a self-contained HTML report (index.html, and report.json it was drawn from) into this directory.")
    package var report: String?
    /// The name to save the run under (``BaselineDirectory/save(_:as:)``).
    @Option(help: "Save this run as baseline NAME (NAME.json in --baseline-dir).")
    package var saveBaseline: String?
    /// The saved baseline to compare with (``Report/compare(with:name:)``).
    @Option(help: "Compare every row with baseline NAME: improved, regressed or within noise, with the change and its interval.")
    package var baseline: String?
    /// ``BaselineDirectory/path``.
    @Option(help: "Where baselines are saved.")
    package var baselineDir = BaselineDirectory.defaultPath
    /// The regression, in percent, that fails the run (``Report/regressions(beyond:)``).
    @Option(help: "With --baseline: exit with status 1 when a row regressed by at least PCT percent.")
    package var failOnRegression: Double?

    /// Options with nothing set.
    package init() {}

    /// Checks the ranges, and that `--fail-on-regression` comes with `--baseline`.
    package func validate() throws {
        if let runs, !(1...100).contains(runs) { throw ValidationError("--runs must be between 1 and 100") }
        if let failOnRegression {
            guard baseline != nil else { throw ValidationError("--fail-on-regression needs --baseline") }
            guard failOnRegression >= 0, failOnRegression <= 1000 else { throw ValidationError("--fail-on-regression is a percentage between 0 and 1000") }
        }
    }

    /// Sets `options`' runs and warm-up where given.
    package func apply(to options: inout BenchOptions) {
        if let runs { options.runs = runs }
        if let warmUp { options.warmUp = warmUp }
    }

    /// Loads the baseline (before the runs, so a wrong name fails at once), runs `runner`,
    /// compares, writes `--json`, `--report` and `--save-baseline`, and passes the table and
    /// the lines about what was written to `write`.
    ///
    /// - Throws: ``BenchError`` for a baseline that cannot be read or written; `ExitCode(1)`
    ///   after writing everything when a row regressed past `--fail-on-regression`.
    package func run(_ runner: BenchRunner, write: (String) throws -> Void) async throws {
        let directory = BaselineDirectory(path: baselineDir)
        var saved: Report?
        if let baseline { saved = try await blocking { try directory.load(baseline) } }
        // A name that cannot be saved fails before the runs, not after minutes of them.
        if let saveBaseline { _ = try directory.file(saveBaseline) }
        var measured = try await runner.run()
        if let saved, let baseline { measured.compare(with: saved, name: baseline) }
        try write(measured.table() + "\n")
        let finished = measured
        if let json {
            try await blocking { try finished.writeJSON(to: json) }
            try write("wrote \(json)\n")
        }
        if let report {
            let page = try await blocking { try finished.writePage(in: report) }
            try write("wrote \(page)\n")
        }
        if let saveBaseline {
            try await blocking { try directory.save(finished, as: saveBaseline) }
            try write("saved baseline \(saveBaseline) in \(baselineDir)\n")
        }
        if let failOnRegression {
            let regressed = finished.regressions(beyond: failOnRegression / 100)
            if !regressed.isEmpty {
                try write("regressed by \(format(failOnRegression))% or more against \(baseline ?? ""): "
                    + regressed.map { "\($0.group) \($0.scenario)" }.joined(separator: "; ") + "\n")
                throw ExitCode(1)
            }
        }
    }
}
