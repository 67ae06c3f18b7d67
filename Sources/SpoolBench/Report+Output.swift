import Foundation

extension Report {
    /// The report as an aligned text table, one row per comparison: each figure and ratio the
    /// median of the runs with its interval in brackets, goals beside ratios, and with a
    /// baseline the change and its verdict.
    package func table() -> String {
        var lines = [String]()
        lines.append("Spool benchmarks: \(run.events) events, \(Int(run.meanEventBytes.rounded())) B mean JSON, "
            + "in \(run.directory)")
        lines.append(run.environment.summary)
        lines.append("load \(run.loadBefore) -> \(run.loadAfter); median of \(run.runs) interleaved run(s)"
            + (run.warmUp ? " after a warm-up" : "") + ", [95% bootstrap interval]; ≤ \(format(run.secondsPerMeasurement)) s "
            + "per measurement. \(run.note)")
        if let hw = hardware {
            lines.append("hardware: zstd -1 64 KiB (warm, repeated) \(format(hw.zstdCompressMBps)) MB/s (ratio \(format(hw.zstdRatio)), "
                + "decompress \(format(hw.zstdDecompressMBps)) MB/s); sequential write+fdatasync "
                + "\(format(hw.sequentialWriteMBps)) MB/s; 256 B append+fdatasync \(format(hw.fdatasyncPerSecond))/s"
                + (hw.fdatasyncLatency.map { " (p50 \(format($0.p50)) µs)" } ?? ""))
        }
        if let comparedWith {
            lines.append("compared with baseline \"\(comparedWith.name)\""
                + (comparedWith.environmentDifferences.isEmpty ? " (same environment)"
                    : "; ANOTHER ENVIRONMENT: " + comparedWith.environmentDifferences.joined(separator: "; "))
                + (comparedWith.loadDifference.map { "; LOAD DIFFERS: " + $0 } ?? ""))
        }
        var header = ["group", "scenario", "Spool", "baseline", "baseline figure", "ratio", "goal", ""]
        if let comparedWith { header.append("vs \(comparedWith.name)") }
        var cells = [header]
        for row in rows {
            let ratio = row.ratio.map { value in
                let shown: (Double) -> String = { row.ratioStyle == "%" ? format($0 * 100) + "%" : format($0) + "×" }
                return shown(value) + (row.ratioEstimate.map { bracket($0, shown) } ?? "")
            } ?? ""
            let goal = row.goal.map { ($0.atLeast ? "≥ " : "≤ ") + (row.ratioStyle == "%" ? format($0.ratio * 100) + "%" : format($0.ratio) + "×") } ?? ""
            let met = row.goalMet.map { $0 ? "met" : "MISSED" } ?? ""
            var line = [row.group, row.scenario, describe(row.spool), row.baseline ?? "",
                        row.baselineFigure.map(describe) ?? "", ratio, goal, met]
            if comparedWith != nil { line.append(row.change.map(describe) ?? "not in baseline") }
            cells.append(line)
        }
        lines.append(contentsOf: align(cells))
        var latency = [["latency per call (µs)", "p50", "p90", "p99", "p99.9", "max", "calls"]]
        var seen = Set<String>()
        func addLatency(_ name: String, _ figure: Figure?) {
            guard let l = figure?.latency, seen.insert(name).inserted else { return }
            latency.append([name] + [l.p50, l.p90, l.p99, l.p999, l.max, Double(l.samples)].map(format))
        }
        for row in rows { addLatency("Spool " + row.scenario, row.spool) }
        for row in rows { addLatency(row.baseline ?? "", row.baselineFigure) }
        if latency.count > 1 {
            lines.append("")
            lines.append(contentsOf: align(latency))
        }
        return lines.joined(separator: "\n")
    }

    /// The report as pretty-printed JSON with sorted keys.
    package func json() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self)
    }

    /// Writes ``json()`` to `path`.
    package func writeJSON(to path: String) throws {
        try json().write(to: URL(fileURLWithPath: path))
    }
}

private func describe(_ figure: Figure) -> String {
    format(figure.value) + " " + figure.unit + (figure.estimate.map { bracket($0, format) } ?? "")
        + (figure.note.map { " (\($0))" } ?? "")
}

/// ` [low–high]` of an estimate of several runs, `noisy` when it is, and its outliers; empty for one run.
private func bracket(_ estimate: Estimate, _ shown: (Double) -> String) -> String {
    guard estimate.samples.count > 1 else { return "" }
    return " [\(shown(estimate.low))–\(shown(estimate.high))]" + (estimate.noisy ? " noisy" : "")
        + (estimate.outliers.isEmpty ? "" : " \(estimate.outliers.count) outlier(s)")
}

/// `-12% [-15%, -9%] regressed`.
private func describe(_ change: Change) -> String {
    func percent(_ value: Double) -> String { (value > 0 ? "+" : "") + format(value * 100) + "%" }
    return "\(percent(change.relative)) [\(percent(change.low)), \(percent(change.high))] \(change.verdict.rawValue)"
}

/// Three significant figures, grouped thousands: `1,234,567`, `12.3`, `0.123`.
func format(_ value: Double) -> String {
    guard value.isFinite else { return "—" }
    let magnitude = abs(value)
    if magnitude >= 1000 {
        let rounded = Int(value.rounded())
        var digits = Array(String(abs(rounded)))
        var out = [Character]()
        while digits.count > 3 {
            out.insert(contentsOf: [","] + digits.suffix(3), at: 0)
            digits.removeLast(3)
        }
        out.insert(contentsOf: digits, at: 0)
        return (rounded < 0 ? "-" : "") + String(out)
    }
    let decimals = magnitude >= 100 ? 0 : magnitude >= 10 ? 1 : magnitude >= 1 ? 2 : 3
    return String(format: "%.\(decimals)f", value)
}

private func align(_ cells: [[String]]) -> [String] {
    let columns = cells.map(\.count).max() ?? 0
    var widths = [Int](repeating: 0, count: columns)
    for row in cells { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
    return cells.enumerated().flatMap { index, row -> [String] in
        let line = row.enumerated().map { i, cell in
            cell + String(repeating: " ", count: widths[i] - cell.count)
        }.joined(separator: "  ").replacingOccurrences(of: "\\s+$", with: "", options: .regularExpression)
        return index == 0 ? [line, String(repeating: "-", count: line.count)] : [line]
    }
}
