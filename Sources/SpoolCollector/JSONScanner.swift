/// A strict RFC 8259 scanner over untrusted bytes: it finds where values start and end
/// without building them, so the collector can keep each record's JSON text exactly as sent.
///
/// It never traps on bad input: every malformed byte sequence throws ``JSONScanError``, and
/// nesting deeper than ``maxDepth`` is refused, so recursion is bounded. It checks JSON
/// grammar, not UTF-8 (the caller validates the whole body once). Not thread-safe; cheap to make.
struct JSONScanner {
    /// The deepest nesting of arrays and objects accepted, the body's own levels included
    /// (a `json` batch's array and envelope are 2 of them). The sync worker embeds a record
    /// as JSON only up to this minus 2 (SpoolSync's `JSONValidator.maxDepth`), so whatever it
    /// sends is accepted here. Change the two together.
    static let maxDepth = 128

    private let bytes: [UInt8]
    private var index: Int
    private let end: Int

    /// Scans `bytes[range]`.
    init(_ bytes: [UInt8], range: Range<Int>) {
        self.bytes = bytes
        self.index = range.lowerBound
        self.end = range.upperBound
    }

    /// The ranges of the elements of the JSON array that makes up the whole input.
    static func arrayElements(of bytes: [UInt8], in range: Range<Int>) throws(JSONScanError) -> [Range<Int>] {
        var scanner = JSONScanner(bytes, range: range)
        scanner.skipWhitespace()
        guard scanner.peek() == UInt8(ascii: "[") else { throw scanner.error("expected a JSON array") }
        var elements: [Range<Int>] = []
        try scanner.scanContainer(close: UInt8(ascii: "]"), depth: 1) { scanner throws(JSONScanError) in
            elements.append(try scanner.scanValue(depth: 1))
        }
        try scanner.expectEnd()
        return elements
    }

    /// The members of the JSON object that makes up the whole input, as raw key text
    /// (without quotes, escapes left as they are) and value ranges.
    static func objectMembers(of bytes: [UInt8], in range: Range<Int>) throws(JSONScanError) -> [(key: Range<Int>, value: Range<Int>)] {
        var scanner = JSONScanner(bytes, range: range)
        scanner.skipWhitespace()
        guard scanner.peek() == UInt8(ascii: "{") else { throw scanner.error("expected a JSON object") }
        var members: [(key: Range<Int>, value: Range<Int>)] = []
        try scanner.scanContainer(close: UInt8(ascii: "}"), depth: 1) { scanner throws(JSONScanError) in
            let key = try scanner.scanString()
            scanner.skipWhitespace()
            try scanner.expect(UInt8(ascii: ":"))
            let value = try scanner.scanValue(depth: 1)
            members.append((key: key.lowerBound + 1 ..< key.upperBound - 1, value: value))
        }
        try scanner.expectEnd()
        return members
    }

    /// Checks that `bytes[range]` is exactly one JSON value, with optional whitespace around it,
    /// and returns the value's range.
    static func singleValue(of bytes: [UInt8], in range: Range<Int>) throws(JSONScanError) -> Range<Int> {
        var scanner = JSONScanner(bytes, range: range)
        let value = try scanner.scanValue(depth: 0)
        try scanner.expectEnd()
        return value
    }

    /// The JSON text of `bytes[range]` without the whitespace between tokens (strings are kept
    /// byte for byte), so a value always fits on one NDJSON line. `range` must hold valid JSON.
    static func compacted(_ bytes: [UInt8], _ range: Range<Int>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(range.count)
        var inString = false
        var escaped = false
        for byte in bytes[range] {
            if inString {
                if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
            } else if byte == UInt8(ascii: "\"") {
                inString = true
            } else if isWhitespace(byte) {
                continue
            }
            out.append(byte)
        }
        return out
    }

    // MARK: - Grammar

    /// Scans `[ ... ]` or `{ ... }` from the opening byte, calling `element` for each item.
    private mutating func scanContainer(
        close: UInt8, depth: Int, _ element: (inout JSONScanner) throws(JSONScanError) -> Void
    ) throws(JSONScanError) {
        guard depth <= Self.maxDepth else { throw error("nesting deeper than \(Self.maxDepth)") }
        index += 1  // the opening bracket
        skipWhitespace()
        if peek() == close {
            index += 1
            return
        }
        while true {
            skipWhitespace()
            try element(&self)
            skipWhitespace()
            switch peek() {
            case UInt8(ascii: ","): index += 1
            case close: index += 1; return
            default: throw error("expected ',' or '\(Character(Unicode.Scalar(close)))'")
            }
        }
    }

    /// Scans one value after optional whitespace, returning its range.
    private mutating func scanValue(depth: Int) throws(JSONScanError) -> Range<Int> {
        skipWhitespace()
        let start = index
        guard let first = peek() else { throw error("unexpected end of input") }
        switch first {
        case UInt8(ascii: "["):
            try scanContainer(close: UInt8(ascii: "]"), depth: depth + 1) { scanner throws(JSONScanError) in
                _ = try scanner.scanValue(depth: depth + 1)
            }
        case UInt8(ascii: "{"):
            try scanContainer(close: UInt8(ascii: "}"), depth: depth + 1) { scanner throws(JSONScanError) in
                _ = try scanner.scanString()
                scanner.skipWhitespace()
                try scanner.expect(UInt8(ascii: ":"))
                _ = try scanner.scanValue(depth: depth + 1)
            }
        case UInt8(ascii: "\""):
            _ = try scanString()
        case UInt8(ascii: "t"): try scanLiteral("true")
        case UInt8(ascii: "f"): try scanLiteral("false")
        case UInt8(ascii: "n"): try scanLiteral("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try scanNumber()
        default: throw error("unexpected character")
        }
        return start ..< index
    }

    /// Scans a string from its opening quote, returning its range including both quotes.
    private mutating func scanString() throws(JSONScanError) -> Range<Int> {
        let start = index
        guard peek() == UInt8(ascii: "\"") else { throw error("expected a string") }
        index += 1
        while let byte = peek() {
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return start ..< index
            case UInt8(ascii: "\\"):
                guard let escape = peek() else { throw error("unterminated escape") }
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                    UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    continue
                case UInt8(ascii: "u"):
                    for _ in 0..<4 {
                        guard let digit = peek(), isHexDigit(digit) else { throw error("bad \\u escape") }
                        index += 1
                    }
                default:
                    throw error("bad escape")
                }
            case 0..<0x20:
                throw error("control character in a string")
            default:
                continue
            }
        }
        throw error("unterminated string")
    }

    private mutating func scanNumber() throws(JSONScanError) {
        if peek() == UInt8(ascii: "-") { index += 1 }
        if peek() == UInt8(ascii: "0") {
            index += 1
        } else {
            guard scanDigits() else { throw error("bad number") }
        }
        if peek() == UInt8(ascii: ".") {
            index += 1
            guard scanDigits() else { throw error("bad number") }
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            index += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { index += 1 }
            guard scanDigits() else { throw error("bad number") }
        }
    }

    /// Scans one or more digits; returns false if there were none.
    private mutating func scanDigits() -> Bool {
        let start = index
        while let byte = peek(), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { index += 1 }
        return index > start
    }

    private mutating func scanLiteral(_ literal: StaticString) throws(JSONScanError) {
        let count = literal.utf8CodeUnitCount
        guard end - index >= count else { throw error("unexpected end of input") }
        let matches = literal.withUTF8Buffer { expected in
            expected.indices.allSatisfy { bytes[index + $0] == expected[$0] }
        }
        guard matches else { throw error("unexpected character") }
        index += count
    }

    // MARK: - Helpers

    private func peek() -> UInt8? {
        index < end ? bytes[index] : nil
    }

    private mutating func skipWhitespace() {
        while let byte = peek(), Self.isWhitespace(byte) { index += 1 }
    }

    private mutating func expect(_ byte: UInt8) throws(JSONScanError) {
        guard peek() == byte else { throw error("expected '\(Character(Unicode.Scalar(byte)))'") }
        index += 1
    }

    private mutating func expectEnd() throws(JSONScanError) {
        skipWhitespace()
        guard index == end else { throw error("unexpected text after the JSON value") }
    }

    private func error(_ what: String) -> JSONScanError {
        JSONScanError(message: what, offset: index)
    }

    static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
    }

    private func isHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"): true
        default: false
        }
    }
}

/// Malformed JSON: what was wrong and the byte offset where it was found.
struct JSONScanError: Error, Sendable {
    var message: String
    var offset: Int
}
