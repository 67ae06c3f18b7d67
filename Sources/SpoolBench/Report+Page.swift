import Foundation

extension Report {
    /// Writes `DIRECTORY/index.html` (``page()``) and `DIRECTORY/report.json` (``json()``, the
    /// data it was drawn from, linked from the page), making the directory (0700) if needed.
    /// Blocking. Returns the page's path.
    package func writePage(in directory: String) throws -> String {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let page = directory + "/index.html"
        try json().write(to: URL(fileURLWithPath: directory + "/report.json"), options: .atomic)
        try Data(self.page().utf8).write(to: URL(fileURLWithPath: page), options: .atomic)
        return page
    }

    /// One self-contained HTML page: the environment, inline SVG charts (throughput against
    /// SQLite or the hardware, open-loop latency percentiles, sync rates, bytes per event, and
    /// the change against a baseline), and the table. No network, no external script; it
    /// reflows to a phone's width and prints. The one inline script marks the page
    /// `data-rendered` once it ran without an error (`data-error` otherwise).
    package func page() -> String {
        var charts = ""
        charts += Chart.bars("Throughput: Spool against its baseline (SQLite or the hardware's ceiling), median and 95% interval",
                             id: "throughput", groups: barGroups { $0.spool.higherIsBetter && $0.spool.unit != "events" && !$0.group.hasPrefix("sync") })
        let openLoop = rows.filter { $0.scenario.contains("open loop") && $0.spool.latency != nil }
        var curves = openLoop.map { row in
            Chart.Line(row: row.key, series: "spool", label: row.scenario, points: row.spool.latency!.curve.map { (label($0.percentile), $0.micros) })
        }
        if let hardware = openLoop.first?.baselineFigure?.latency {
            curves.append(Chart.Line(row: openLoop[0].key, series: "baseline", label: openLoop[0].baseline ?? "baseline",
                                     points: hardware.curve.map { (label($0.percentile), $0.micros) }))
        }
        if !curves.isEmpty { charts += Chart.lines("Synced appends in an open loop: latency by percentile", id: "latency", curves, unit: "µs") }
        let sync = barGroups { $0.group.hasPrefix("sync") }
        if !sync.isEmpty { charts += Chart.bars("Sync: rates and latencies against collector distance and faults", id: "sync", groups: sync) }
        let bytes = barGroups { $0.spool.unit == "B/event" }
        if !bytes.isEmpty { charts += Chart.bars("Bytes per event on disk", id: "bytes", groups: bytes) }
        if let comparedWith {
            let changes: [(label: String, bars: [Chart.Bar])] = rows.compactMap { row in row.change.map { change in
                (label: row.group + " · " + row.scenario, bars: [Chart.Bar(
                    row: row.key, series: "change", label: change.verdict.rawValue, value: change.relative,
                    low: change.low, high: change.high, text: String(format: "%+.1f%%", change.relative * 100),
                    style: change.verdict == .regressed ? "regressed" : change.verdict == .improved ? "improved" : "noise")])
            } }
            charts += Chart.bars("Before (baseline \(comparedWith.name)) and after: change of Spool's figure, with its interval",
                                 id: "change", groups: changes, diverging: true)
        }
        let differences = comparedWith.map { $0.environmentDifferences.isEmpty ? "" : "<p class=\"warning\">The baseline ran in another environment: "
            + escape($0.environmentDifferences.joined(separator: "; ")) + "</p>" } ?? ""
        let load = comparedWith?.loadDifference.map { "<p class=\"warning\">Against the baseline, " + escape($0) + ".</p>" } ?? ""
        return """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>spool bench</title>
            <style>\(Self.style)</style></head>
            <body>
            <h1>spool bench</h1>
            <p>\(escape(run.environment.summary))</p>
            <p>Median of \(run.runs) interleaved run(s)\(run.warmUp ? " after a warm-up" : ""); whiskers are 95% percentile-bootstrap intervals. \(escape(run.note)) <a href="report.json">The data (JSON)</a>.</p>
            \(differences)\(load)
            \(charts)
            <h2>Table</h2>
            <pre>\(escape(table()))</pre>
            <script>
            window.addEventListener("error", function (e) { document.documentElement.dataset.error = String(e.message); });
            document.documentElement.dataset.rendered = String(document.querySelectorAll("figure.chart").length);
            </script>
            </body></html>

            """
    }

    /// A group of bars per row that `include`s: Spool's figure and its baseline's.
    private func barGroups(_ include: (Row) -> Bool) -> [(label: String, bars: [Chart.Bar])] {
        rows.filter(include).map { row in
            var bars = [bar(row, "spool", "Spool", row.spool)]
            if let figure = row.baselineFigure { bars.append(bar(row, "baseline", row.baseline ?? "baseline", figure)) }
            return (row.group + " · " + row.scenario, bars)
        }
    }

    private func bar(_ row: Row, _ series: String, _ label: String, _ figure: Figure) -> Chart.Bar {
        Chart.Bar(row: row.key, series: series, label: label, value: figure.value, low: figure.estimate?.low,
                  high: figure.estimate?.high, text: format(figure.value) + " " + figure.unit + ((figure.estimate?.noisy ?? false) ? " noisy" : ""),
                  style: series)
    }

    private func label(_ percentile: Double) -> String { percentile == 100 ? "max" : format(percentile) }

    static let style = """
        body{font:15px/1.4 system-ui,sans-serif;margin:0 auto;padding:12px;max-width:960px;color:#222}
        h1{font-size:1.4em}figure{margin:16px 0}figcaption{font-weight:600;margin-bottom:4px}
        svg{width:100%;height:auto;overflow:visible}text{font-size:11px;fill:#333}text.group{font-weight:600}
        rect.spool{fill:#2b6cb0}rect.baseline{fill:#a0aec0}rect.improved{fill:#2f855a}rect.regressed{fill:#c53030}rect.noise{fill:#a0aec0}
        .whisker,.axis{stroke:#222;stroke-width:1;fill:none}.line{fill:none;stroke-width:2}
        .c0{stroke:#2b6cb0;fill:#2b6cb0;color:#2b6cb0}.c1{stroke:#dd6b20;fill:#dd6b20;color:#dd6b20}.c2{stroke:#2f855a;fill:#2f855a;color:#2f855a}
        .c3{stroke:#805ad5;fill:#805ad5;color:#805ad5}.c4{stroke:#c53030;fill:#c53030;color:#c53030}.c5{stroke:#718096;fill:#718096;color:#718096}
        .legend{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:4px 16px}.legend li{border-left:12px solid;padding-left:6px;fill:none}
        .warning{color:#c53030;font-weight:600}pre{overflow-x:auto;font-size:11px}
        @media print{body{max-width:none}figure{break-inside:avoid}pre{white-space:pre-wrap}}
        """
}
