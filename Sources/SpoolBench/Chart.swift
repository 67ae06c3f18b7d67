import Foundation

/// Inline SVG charts for the HTML report: horizontal bars with interval whiskers, and lines.
/// Every drawn point carries its data (`data-row`, `data-series`, `data-value`, and
/// `data-low`/`data-high` for an interval) so a test can read the chart back from the DOM.
/// Pure: strings in, a string out.
struct Chart {
    /// One bar: a row's figure, with its interval when it has one.
    struct Bar {
        var row: String
        var series: String
        var label: String
        var value: Double
        var low: Double?
        var high: Double?
        var text: String
        var style = "spool"
    }

    /// One line of a line chart: points at evenly spaced x labels.
    struct Line {
        var row: String
        var series: String
        var label: String
        var points: [(x: String, y: Double)]
    }

    static let width = 640.0

    /// Groups of bars, each group scaled to its own largest value (figures of different units
    /// and magnitudes side by side); with `diverging`, bars grow left or right of a middle zero.
    static func bars(_ title: String, id: String, groups: [(label: String, bars: [Bar])], diverging: Bool = false) -> String {
        let labelWidth = 0.0, barHeight = 14.0, gap = 6.0
        var y = 4.0
        var body = ""
        for group in groups {
            body += text(x: 0, y: y + 11, group.label, className: "group")
            y += 16
            let scale = group.bars.map { max(abs($0.value), abs($0.low ?? 0), abs($0.high ?? 0)) }.max() ?? 0
            let span = (width - labelWidth - 150) / (diverging ? 2 : 1)
            let zero = labelWidth + (diverging ? span : 0)
            func xOf(_ value: Double) -> Double { zero + (scale > 0 ? value / scale * span : 0) }
            for bar in group.bars {
                let x0 = min(zero, xOf(bar.value)), x1 = max(zero, xOf(bar.value))
                body += "<rect class=\"\(bar.style)\" x=\"\(f(x0))\" y=\"\(f(y))\" width=\"\(f(max(x1 - x0, 0.5)))\" height=\"\(f(barHeight))\""
                    + data(bar.row, bar.series, bar.value, bar.low, bar.high) + "><title>\(escape(bar.label + ": " + bar.text))</title></rect>"
                if let low = bar.low, let high = bar.high, high > low {
                    let mid = y + barHeight / 2
                    body += "<path class=\"whisker\" d=\"M\(f(xOf(low))) \(f(mid))H\(f(xOf(high)))M\(f(xOf(low))) \(f(mid - 4))v8M\(f(xOf(high))) \(f(mid - 4))v8\"/>"
                }
                body += text(x: max(x1, xOf(bar.high ?? bar.value)) + 4, y: y + 11, bar.label + " " + bar.text, className: "value")
                y += barHeight + 3
            }
            y += gap
        }
        if diverging { body += "<path class=\"axis\" d=\"M\(f(labelWidth + (width - labelWidth - 150) / 2)) 0V\(f(y))\"/>" }
        return figure(title, id: id, height: y, body: body)
    }

    /// Lines over evenly spaced x labels, y on a log scale (latencies from microseconds to seconds).
    static func lines(_ title: String, id: String, _ lines: [Line], unit: String) -> String {
        let height = 260.0, left = 48.0, bottom = 24.0, top = 8.0, right = 12.0
        let values = lines.flatMap { $0.points.map { max($0.y, 1e-3) } }
        guard let minimum = values.min(), let maximum = values.max(), let labels = lines.first?.points.map(\.x) else { return "" }
        let low = log10(minimum), high = max(log10(maximum), low + 1)
        func xOf(_ index: Int) -> Double { left + Double(index) / Double(max(labels.count - 1, 1)) * (width - left - right) }
        func yOf(_ value: Double) -> Double { top + (high - log10(max(value, 1e-3))) / (high - low) * (height - top - bottom) }
        var body = "<path class=\"axis\" d=\"M\(f(left)) \(f(top))V\(f(height - bottom))H\(f(width - right))\"/>"
        for (index, label) in labels.enumerated() {
            body += text(x: xOf(index) - 8, y: height - 8, label, className: "tick")
        }
        for decade in Int(low.rounded(.down))...Int(high.rounded(.up)) {
            let value = pow(10, Double(decade))
            guard value >= minimum / 10, yOf(value) >= top - 1, yOf(value) <= height - bottom + 1 else { continue }
            body += text(x: 0, y: yOf(value) + 4, format(value) + " " + unit, className: "tick")
        }
        for (number, line) in lines.enumerated() {
            let path = line.points.enumerated().map { "\($0 == 0 ? "M" : "L")\(f(xOf($0))) \(f(yOf($1.y)))" }.joined()
            body += "<path class=\"line c\(number % 6)\" d=\"\(path)\"><title>\(escape(line.label))</title></path>"
            for (index, point) in line.points.enumerated() {
                body += "<circle class=\"c\(number % 6)\" cx=\"\(f(xOf(index)))\" cy=\"\(f(yOf(point.y)))\" r=\"3\""
                    + data(line.row, line.series, point.y, nil, nil) + " data-x=\"\(escape(point.x))\"><title>\(escape("\(line.label): p\(point.x) \(format(point.y)) \(unit)"))</title></circle>"
            }
        }
        let legend = lines.enumerated().map { "<li class=\"c\($0 % 6)\">\(escape($1.label))</li>" }.joined()
        return figure(title, id: id, height: height, body: body) + "<ul class=\"legend\">\(legend)</ul>"
    }

    private static func figure(_ title: String, id: String, height: Double, body: String) -> String {
        "<figure id=\"\(id)\" class=\"chart\"><figcaption>\(escape(title))</figcaption>"
            + "<svg viewBox=\"0 0 \(f(width)) \(f(height))\" role=\"img\" aria-label=\"\(escape(title))\">\(body)</svg></figure>\n"
    }

    private static func data(_ row: String, _ series: String, _ value: Double, _ low: Double?, _ high: Double?) -> String {
        " data-row=\"\(escape(row))\" data-series=\"\(series)\" data-value=\"\(value)\""
            + (low.map { " data-low=\"\($0)\"" } ?? "") + (high.map { " data-high=\"\($0)\"" } ?? "")
    }

    private static func text(x: Double, y: Double, _ string: String, className: String) -> String {
        "<text class=\"\(className)\" x=\"\(f(x))\" y=\"\(f(y))\">\(escape(string))</text>"
    }

    private static func f(_ value: Double) -> String { String(format: "%.1f", value) }
}

/// `string` with `&`, `<`, `>` and `"` escaped for HTML text and attributes.
func escape(_ string: String) -> String {
    var out = ""
    for character in string {
        switch character {
        case "&": out += "&amp;"
        case "<": out += "&lt;"
        case ">": out += "&gt;"
        case "\"": out += "&quot;"
        default: out.append(character)
        }
    }
    return out
}
