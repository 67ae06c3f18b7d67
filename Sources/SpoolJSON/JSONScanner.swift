/// Spool's one JSON grammar: a strict RFC 8259 scanner over untrusted bytes that finds where
/// values start and end without building them.
///
/// Two uses, one grammar:
/// - the sync worker asks ``isValid(_:maxDepth:)`` whether a record is one JSON text, to embed
///   its bytes unchanged (`JSONValidator` in SpoolSync);
/// - the reference collector takes a body apart by ranges (``arrayElements(of:in:)``,
///   ``objectMembers(of:in:)``, ``singleValue(of:in:)``), so it keeps each record's JSON text
///   exactly as sent.
///
/// It never traps on bad input: every malformed byte sequence throws ``JSONScanError``, and
/// nesting deeper than the depth limit is refused, so recursion is bounded. Strings must be
/// well-formed UTF-8 (outside strings, the grammar admits only ASCII). Allocation-free unless
/// asked for ranges. Not thread-safe; cheap to make.
package struct JSONScanner {
    /// The deepest nesting of arrays and objects the reference collector accepts in a body,
    /// the body's own levels included (a `json` batch's array and envelope are 2 of them).
    package static let maxDepth = 128
    /// The deepest nesting a record may have to travel as JSON: ``maxDepth`` less the 2
    /// levels the `json` layout adds around it (the others add 1), so every body the sync
    /// worker makes fits the collector's limit. A deeper record is sent as a JSON string.
    package static let recordMaxDepth = maxDepth - 2

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index: Int
    private let end: Int
    private let maxDepth: Int
    /// Why the scan failed, once a step returned `false`.
    private var failure: JSONScanError?

    /// Scans `bytes[range]`, refusing nesting deeper than `maxDepth`.
    private init(_ bytes: UnsafeBufferPointer<UInt8>, range: Range<Int>, maxDepth: Int) {
        self.bytes = bytes
        self.index = range.lowerBound
        self.end = range.upperBound
        self.maxDepth = maxDepth
    }

    // MARK: - The two uses

    /// Whether `bytes` is a single valid JSON text (UTF-8 included) nested at most `maxDepth` deep.
    ///
    /// - Complexity: O(bytes); no allocation.
    package static func isValid(_ bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) -> Bool {
        var scanner = JSONScanner(bytes, range: 0..<bytes.count, maxDepth: maxDepth)
        return scanner.value(depth: 0) && scanner.atEnd()
    }

    /// Checks that `bytes[range]` is exactly one JSON value, with optional whitespace around it,
    /// and returns the value's range.
    package static func singleValue(of bytes: [UInt8], in range: Range<Int>) throws(JSONScanError) -> Range<Int> {
        try bytes.withUnsafeBufferPointer { buffer throws(JSONScanError) in
            var scanner = JSONScanner(buffer, range: range, maxDepth: maxDepth)
            guard let value = scanner.valueRange(depth: 0), scanner.atEnd() else { throw scanner.error }
            return value
        }
    }

    /// The ranges of the elements of the JSON array that makes up the whole of `bytes[range]`.
    package static func arrayElements(of bytes: [UInt8], in range: Range<Int>) throws(JSONScanError) -> [Range<Int>] {
        try bytes.withUnsafeBufferPointer { buffer throws(JSONScanError) in
            var scanner = JSONScanner(buffer, range: range, maxDepth: maxDepth)
            var elements: [Range<Int>] = []
            var next = scanner.openWhole(UInt8(ascii: "["), close: UInt8(ascii: "]"), else: .expectedArray)
            while next == .item {
                guard let element = scanner.valueRange(depth: 1) else { throw scanner.error }
                elements.append(element)
                next = scanner.afterItem(close: UInt8(ascii: "]"))
            }
            guard next == .end, scanner.atEnd() else { throw scanner.error }
            return elements
        }
    }

    /// The members of the JSON object that makes up the whole of `bytes[range]`, as raw key
    /// text (without quotes, escapes left as they are) and value ranges.
    package static func objectMembers(of bytes: [UInt8], in range: Range<Int>) throws(JSONScanError) -> [(key: Range<Int>, value: Range<Int>)] {
        try bytes.withUnsafeBufferPointer { buffer throws(JSONScanError) in
            var scanner = JSONScanner(buffer, range: range, maxDepth: maxDepth)
            var members: [(key: Range<Int>, value: Range<Int>)] = []
            var next = scanner.openWhole(UInt8(ascii: "{"), close: UInt8(ascii: "}"), else: .expectedObject)
            while next == .item {
                let key = scanner.index + 1
                guard scanner.string() else { throw scanner.error }
                let keyEnd = scanner.index - 1
                guard scanner.colon(), let value = scanner.valueRange(depth: 1) else { throw scanner.error }
                members.append((key: key ..< keyEnd, value: value))
                next = scanner.afterItem(close: UInt8(ascii: "}"))
            }
            guard next == .end, scanner.atEnd() else { throw scanner.error }
            return members
        }
    }

    /// Steps over the opening bracket of the whole input, after whitespace, as ``open(depth:close:)``
    /// does at depth 1; fails with `reason` when the input starts with something else.
    private mutating func openWhole(_ bracket: UInt8, close: UInt8, else reason: JSONScanError.Reason) -> Next {
        skipWhitespace()
        guard peek() == bracket else { return stop(reason) }
        return open(depth: 1, close: close)
    }

    /// The JSON text of `bytes[range]` without the whitespace between tokens (strings are kept
    /// byte for byte), so a value always fits on one NDJSON line. `range` must hold valid JSON.
    package static func compacted(_ bytes: [UInt8], _ range: Range<Int>) -> [UInt8] {
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

    /// Whether `byte` is JSON whitespace: space, tab, line feed or carriage return.
    @inline(__always)
    package static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
    }

    // MARK: - Grammar
    //
    // Every step returns whether it succeeded; a failure records its reason and offset
    // (`failure`) and every caller returns at once. (Typed throws through the recursion cost
    // the sync worker's record check a third more instructions than plain returns.)

    /// Scans one value after optional whitespace; its range is from where the whitespace ends
    /// to ``index``.
    private mutating func value(depth: Int) -> Bool {
        skipWhitespace()
        guard let first = peek() else { return fail(.unexpectedEnd) }
        switch first {
        case UInt8(ascii: "["):
            var next = open(depth: depth + 1, close: UInt8(ascii: "]"))
            while next == .item {
                guard value(depth: depth + 1) else { return false }
                next = afterItem(close: UInt8(ascii: "]"))
            }
            return next == .end
        case UInt8(ascii: "{"):
            var next = open(depth: depth + 1, close: UInt8(ascii: "}"))
            while next == .item {
                guard string(), colon(), value(depth: depth + 1) else { return false }
                next = afterItem(close: UInt8(ascii: "}"))
            }
            return next == .end
        case UInt8(ascii: "\""): return string()
        case UInt8(ascii: "t"): return literal("true")
        case UInt8(ascii: "f"): return literal("false")
        case UInt8(ascii: "n"): return literal("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return number()
        default: return fail(.unexpectedCharacter)
        }
    }

    /// Scans one value after optional whitespace and returns its range.
    private mutating func valueRange(depth: Int) -> Range<Int>? {
        skipWhitespace()
        let start = index
        return value(depth: depth) ? start ..< index : nil
    }

    /// Where the scan of a container stands: at an item, past its closing bracket, or failed.
    private enum Next { case item, end, failed }

    /// Steps over the opening bracket of a container at `depth` (refused past the limit) and
    /// the whitespace after it, and over `close` too when the container is empty.
    @inline(__always)
    private mutating func open(depth: Int, close: UInt8) -> Next {
        guard depth <= maxDepth else { return stop(.tooDeep(maxDepth)) }
        index += 1
        skipWhitespace()
        guard peek() == close else { return .item }
        index += 1
        return .end
    }

    /// Steps over what follows a container's item: a comma and whitespace (another item
    /// follows) or the closing bracket. The commas between items are taken here, and only here.
    @inline(__always)
    private mutating func afterItem(close: UInt8) -> Next {
        skipWhitespace()
        switch peek() {
        case UInt8(ascii: ","):
            index += 1
            skipWhitespace()
            return .item
        case close:
            index += 1
            return .end
        default:
            return stop(.expectedCommaOr(close))
        }
    }

    /// Steps over the whitespace after a key and the `:` that follows it.
    @inline(__always)
    private mutating func colon() -> Bool {
        skipWhitespace()
        guard peek() == UInt8(ascii: ":") else { return fail(.expected(UInt8(ascii: ":"))) }
        index += 1
        return true
    }

    /// Scans a string from its opening quote.
    private mutating func string() -> Bool {
        guard peek() == UInt8(ascii: "\"") else { return fail(.expectedString) }
        index += 1
        while index < end {
            skipPlainStringBytes()
            guard let byte = peek() else { break }
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return true
            case UInt8(ascii: "\\"):
                index += 1
                guard let escape = peek() else { return fail(.unterminatedEscape) }
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                    UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    continue
                case UInt8(ascii: "u"):
                    for _ in 0..<4 {
                        guard let digit = peek(), isHexDigit(digit) else { return fail(.badUnicodeEscape) }
                        index += 1
                    }
                default:
                    return fail(.badEscape)
                }
            case 0..<0x20:
                return fail(.controlCharacter)
            case 0x20..<0x80:
                index += 1
            default:
                guard let length = UTF8Validation.sequenceLength(bytes, at: index, end: end) else { return fail(.invalidUTF8) }
                index += length
            }
        }
        return fail(.unterminatedString)
    }

    /// Moves to the first string byte that needs a look, eight bytes at a time: anything but
    /// printable ASCII other than `"` and `\`. Within the last seven bytes the byte-by-byte
    /// scan takes over.
    @inline(__always)
    private mutating func skipPlainStringBytes() {
        guard let base = bytes.baseAddress else { return }
        while end - index >= 8 {
            let word = UInt64(littleEndian: UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self))
            let special = SWAR.stringBytesNeedingALook(word)
            guard special == 0 else {
                index += special.trailingZeroBitCount >> 3
                return
            }
            index += 8
        }
    }

    private mutating func number() -> Bool {
        if peek() == UInt8(ascii: "-") { index += 1 }
        if peek() == UInt8(ascii: "0") {
            index += 1
        } else {
            guard digits() else { return fail(.badNumber) }
        }
        if peek() == UInt8(ascii: ".") {
            index += 1
            guard digits() else { return fail(.badNumber) }
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            index += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { index += 1 }
            guard digits() else { return fail(.badNumber) }
        }
        return true
    }

    /// Scans one or more digits; returns false if there were none.
    private mutating func digits() -> Bool {
        let start = index
        while let byte = peek(), byte &- UInt8(ascii: "0") < 10 { index += 1 }
        return index > start
    }

    private mutating func literal(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard end - index >= count else { return fail(.unexpectedEnd) }
        let expected = word.utf8Start
        for offset in 0..<count where bytes[index + offset] != expected[offset] { return fail(.unexpectedCharacter) }
        index += count
        return true
    }

    // MARK: - Helpers

    @inline(__always)
    private func peek() -> UInt8? {
        index < end ? bytes[index] : nil
    }

    @inline(__always)
    private mutating func skipWhitespace() {
        while let byte = peek(), Self.isWhitespace(byte) { index += 1 }
    }

    /// Whether only whitespace is left.
    private mutating func atEnd() -> Bool {
        skipWhitespace()
        return index == end || fail(.trailingText)
    }

    /// Records why the scan failed, where, and returns `false`.
    private mutating func fail(_ reason: JSONScanError.Reason) -> Bool {
        failure = JSONScanError(reason: reason, offset: index)
        return false
    }

    /// Records why the scan of a container failed, where, and returns ``Next/failed``.
    private mutating func stop(_ reason: JSONScanError.Reason) -> Next {
        failure = JSONScanError(reason: reason, offset: index)
        return .failed
    }

    /// The failure a step returned `false` for.
    private var error: JSONScanError {
        failure ?? JSONScanError(reason: .unexpectedEnd, offset: index)
    }

    @inline(__always)
    private func isHexDigit(_ byte: UInt8) -> Bool {
        byte &- UInt8(ascii: "0") < 10 || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte | 0x20)
    }
}

/// Malformed JSON: what was wrong and the byte offset where it was found.
package struct JSONScanError: Error, Sendable {
    /// What was wrong, as a value (no text is made unless ``message`` is read: the sync worker
    /// meets this error for every record that is not JSON).
    package enum Reason: Sendable, Equatable {
        case expectedArray, expectedObject, expectedString, unexpectedEnd, unexpectedCharacter
        case unterminatedEscape, badUnicodeEscape, badEscape, controlCharacter, unterminatedString
        case invalidUTF8, badNumber, trailingText
        case tooDeep(Int)
        case expectedCommaOr(UInt8)
        case expected(UInt8)
    }

    /// What was wrong.
    package var reason: Reason
    /// The offset of the byte where it was found.
    package var offset: Int

    /// What was wrong, for a person: "expected a JSON array", "bad number".
    package var message: String {
        func quoted(_ byte: UInt8) -> String { "'\(Character(Unicode.Scalar(byte)))'" }
        switch reason {
        case .expectedArray: return "expected a JSON array"
        case .expectedObject: return "expected a JSON object"
        case .expectedString: return "expected a string"
        case .unexpectedEnd: return "unexpected end of input"
        case .unexpectedCharacter: return "unexpected character"
        case .unterminatedEscape: return "unterminated escape"
        case .badUnicodeEscape: return "bad \\u escape"
        case .badEscape: return "bad escape"
        case .controlCharacter: return "control character in a string"
        case .unterminatedString: return "unterminated string"
        case .invalidUTF8: return "a string that is not valid UTF-8"
        case .badNumber: return "bad number"
        case .trailingText: return "unexpected text after the JSON value"
        case .tooDeep(let limit): return "nesting deeper than \(limit)"
        case .expectedCommaOr(let close): return "expected ',' or \(quoted(close))"
        case .expected(let byte): return "expected \(quoted(byte))"
        }
    }
}
