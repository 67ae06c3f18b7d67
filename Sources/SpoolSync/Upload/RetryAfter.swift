/// Parses an HTTP `Retry-After` value (RFC 9110 §10.2.3): delay-seconds or an HTTP-date.
///
/// A pure function: the current wall-clock time is passed in. All three HTTP-date forms
/// are accepted (IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT`, the obsolete RFC 850
/// `Sunday, 06-Nov-94 08:49:37 GMT` and asctime `Sun Nov  6 08:49:37 1994`). A date in the
/// past means "now" (zero). A number of seconds too large to hold (more digits than any
/// real wait) is a very long wait, about 35,000 years, for the caller's cap to cut down: the
/// server asked for a long wait, not for none. Anything else is `nil`.
enum RetryAfter {
    /// - Parameters:
    ///   - value: the header's value.
    ///   - now: the current time in seconds since 1970-01-01T00:00:00Z.
    static func parse(_ value: String, now: Double) -> Duration? {
        let text = value.utf8.filter { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") }
        if !text.isEmpty, text.allSatisfy(isDigit) {
            return .seconds(text.reduce(0) { min($0 * 10 + Int64($1 - UInt8(ascii: "0")), longest) })
        }
        guard let date = parseHTTPDate(value) else { return nil }
        return .seconds(max(0, Double(date) - now))
    }

    /// Seconds since the epoch of an HTTP-date, or `nil`.
    static func parseHTTPDate(_ value: String) -> Int64? {
        let separators: Set<UInt8> = [UInt8(ascii: " "), UInt8(ascii: ","), UInt8(ascii: "-"), UInt8(ascii: "\t")]
        let tokens = value.utf8.split(whereSeparator: { separators.contains($0) }).map { Array($0) }
        var month: Int?
        var time: (Int, Int, Int)?
        var numbers: [[UInt8]] = []
        var zoneOK = true
        for token in tokens {
            if let index = monthNames.firstIndex(of: lowercased(token)) {
                month = index + 1
            } else if token.contains(UInt8(ascii: ":")) {
                let parts = token.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
                guard parts.count == 3, parts.allSatisfy({ $0.count == 2 && $0.allSatisfy(isDigit) }) else { return nil }
                let fields = parts.map { Int($0[$0.startIndex] - 48) * 10 + Int($0[$0.startIndex + 1] - 48) }
                time = (fields[0], fields[1], fields[2])
            } else if token.allSatisfy(isDigit) {
                numbers.append(token)
            } else if lowercased(token) == Array("gmt".utf8) || dayNames.contains(lowercased(token)) {
                continue
            } else {
                zoneOK = false
            }
        }
        guard zoneOK, let month, let time, numbers.count == 2, numbers[0].count <= 2 else { return nil }
        let day = numbers[0].reduce(0) { $0 * 10 + Int($1 - 48) }
        var year = numbers[1].reduce(0) { $0 * 10 + Int($1 - 48) }
        switch numbers[1].count {
        case 2: year += year < 70 ? 2000 : 1900
        case 4: break
        default: return nil
        }
        guard (1...31).contains(day), time.0 < 24, time.1 < 60, time.2 < 61 else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        return Int64(days) * 86_400 + Int64(time.0 * 3600 + time.1 * 60 + time.2)
    }

    /// The longest delay-seconds value kept (2^40 s): larger ones are cut to it, and any cap
    /// the caller applies is far below.
    private static let longest: Int64 = 1 << 40

    private static let monthNames: [[UInt8]] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"].map { Array($0.utf8) }
    private static let dayNames: [[UInt8]] = [
        "mon", "tue", "wed", "thu", "fri", "sat", "sun",
        "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
    ].map { Array($0.utf8) }

    private static func lowercased(_ token: [UInt8]) -> [UInt8] {
        token.map { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) ? $0 + 32 : $0 }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}

/// Whether `byte` is an ASCII decimal digit: header values are read as bytes.
func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
