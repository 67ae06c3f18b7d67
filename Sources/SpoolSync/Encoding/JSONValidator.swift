/// A fast, allocation-free check that bytes are one JSON text (RFC 8259), UTF-8 included.
///
/// Used to decide whether a record is embedded as JSON (its original bytes, unchanged) or
/// as a JSON string. Nesting deeper than ``maxDepth`` counts as invalid, so a hostile record
/// cannot exhaust the stack. Also reports whether the text holds a line break outside its
/// strings (which NDJSON must turn into spaces).
package struct JSONValidator {
    /// The deepest nesting of arrays and objects accepted: 126. A deeper record is sent as
    /// a JSON string instead, so that every body the worker makes fits the reference
    /// collector's limit (`JSONScanner.maxDepth` in SpoolCollector, 128), which counts the
    /// body's own levels too: the `json` layout's array and envelope add 2 (the others 1).
    /// Change the two together.
    static let maxDepth = 126

    /// Whether `bytes` is a single valid JSON text.
    package static func isValid(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var validator = JSONValidator(bytes: bytes)
        return validator.validateText()
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0

    private init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    private mutating func validateText() -> Bool {
        skipWhitespace()
        guard value(depth: 0) else { return false }
        skipWhitespace()
        return index == bytes.count
    }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func value(depth: Int) -> Bool {
        guard let byte = current else { return false }
        switch byte {
        case UInt8(ascii: "{"): return object(depth: depth + 1)
        case UInt8(ascii: "["): return array(depth: depth + 1)
        case UInt8(ascii: "\""): return string()
        case UInt8(ascii: "t"): return literal("true")
        case UInt8(ascii: "f"): return literal("false")
        case UInt8(ascii: "n"): return literal("null")
        default: return number()
        }
    }

    private mutating func object(depth: Int) -> Bool {
        guard depth <= Self.maxDepth else { return false }
        index += 1
        skipWhitespace()
        if current == UInt8(ascii: "}") { index += 1; return true }
        while true {
            guard current == UInt8(ascii: "\""), string() else { return false }
            skipWhitespace()
            guard current == UInt8(ascii: ":") else { return false }
            index += 1
            skipWhitespace()
            guard value(depth: depth) else { return false }
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): index += 1; skipWhitespace()
            case UInt8(ascii: "}"): index += 1; return true
            default: return false
            }
        }
    }

    private mutating func array(depth: Int) -> Bool {
        guard depth <= Self.maxDepth else { return false }
        index += 1
        skipWhitespace()
        if current == UInt8(ascii: "]") { index += 1; return true }
        while true {
            guard value(depth: depth) else { return false }
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): index += 1; skipWhitespace()
            case UInt8(ascii: "]"): index += 1; return true
            default: return false
            }
        }
    }

    private mutating func literal(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard bytes.count - index >= count else { return false }
        let start = word.utf8Start
        for offset in 0..<count where bytes[index + offset] != start[offset] { return false }
        index += count
        return true
    }

    private mutating func number() -> Bool {
        if current == UInt8(ascii: "-") { index += 1 }
        guard let first = current, isDigit(first) else { return false }
        index += 1
        if first != UInt8(ascii: "0") { skipDigits() }
        if current == UInt8(ascii: ".") {
            index += 1
            guard let next = current, isDigit(next) else { return false }
            skipDigits()
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            index += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            guard let next = current, isDigit(next) else { return false }
            skipDigits()
        }
        return true
    }

    /// Moves to the first string byte that needs a look, eight bytes at a time: anything but
    /// printable ASCII other than `"` and `\`. Within the last seven bytes the byte-by-byte
    /// scan takes over.
    @inline(__always)
    private mutating func skipPlainStringBytes() {
        guard let base = bytes.baseAddress else { return }
        while bytes.count - index >= 8 {
            let word = UInt64(littleEndian: UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self))
            let special = SWAR.stringBytesNeedingALook(word)
            guard special == 0 else {
                index += special.trailingZeroBitCount >> 3
                return
            }
            index += 8
        }
    }

    private mutating func skipDigits() {
        while let byte = current, isDigit(byte) { index += 1 }
    }

    private mutating func string() -> Bool {
        index += 1
        while index < bytes.count {
            skipPlainStringBytes()
            guard index < bytes.count else { return false }
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return true
            case UInt8(ascii: "\\"):
                index += 1
                guard let escaped = current else { return false }
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                    UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    index += 1
                case UInt8(ascii: "u"):
                    guard bytes.count - index > 4 else { return false }
                    for offset in 1...4 where !isHexDigit(bytes[index + offset]) { return false }
                    index += 5
                default:
                    return false
                }
            case 0x00..<0x20:
                return false
            case 0x20..<0x80:
                index += 1
            default:
                guard let length = UTF8Validation.sequenceLength(bytes, at: index) else { return false }
                index += length
            }
        }
        return false
    }
}

/// Well-formed UTF-8 (Unicode Table 3-7): no overlongs, no surrogates, nothing past U+10FFFF.
enum UTF8Validation {
    /// The length of the well-formed sequence starting at `index` (whose first byte is
    /// ≥ 0x80), or `nil` if it is ill-formed.
    @inline(__always)
    static func sequenceLength(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int) -> Int? {
        let lead = bytes[index]
        let needed: Int
        var second: ClosedRange<UInt8> = 0x80...0xBF
        switch lead {
        case 0xC2...0xDF: needed = 1
        case 0xE0: needed = 2; second = 0xA0...0xBF
        case 0xE1...0xEC, 0xEE...0xEF: needed = 2
        case 0xED: needed = 2; second = 0x80...0x9F
        case 0xF0: needed = 3; second = 0x90...0xBF
        case 0xF1...0xF3: needed = 3
        case 0xF4: needed = 3; second = 0x80...0x8F
        default: return nil
        }
        var offset = 1
        while offset <= needed {
            let range = offset == 1 ? second : 0x80...0xBF
            guard index + offset < bytes.count, range.contains(bytes[index + offset]) else { return nil }
            offset += 1
        }
        return offset
    }
}

/// Eight bytes at a time, as one 64-bit word ("SIMD within a register").
enum SWAR {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highs: UInt64 = 0x8080_8080_8080_8080

    /// A high bit in each byte of `word` below `limit` (≤ 0x80), and possibly in bytes above
    /// such a byte (a borrow): zero exactly when no byte is below `limit`.
    @inline(__always)
    static func bytesBelow(_ limit: UInt8, in word: UInt64) -> UInt64 {
        (word &- ones &* UInt64(limit)) & ~word & highs
    }

    /// A high bit in the first byte of `word` (in memory order, little-endian) that a JSON
    /// string cannot hold as it is without a look: `"`, `\`, a control character or a byte
    /// of a multi-byte sequence; zero if there is none. Bytes after the first such one may be
    /// flagged too (borrows), so only the lowest flag is meaningful.
    @inline(__always)
    static func stringBytesNeedingALook(_ word: UInt64) -> UInt64 {
        let quote = bytesBelow(1, in: word ^ (ones &* 0x22))
        let backslash = bytesBelow(1, in: word ^ (ones &* 0x5C))
        let control = bytesBelow(0x20, in: word)
        return quote | backslash | control | (word & highs)
    }
}

@inline(__always)
private func isDigit(_ byte: UInt8) -> Bool { byte &- UInt8(ascii: "0") < 10 }

@inline(__always)
private func isHexDigit(_ byte: UInt8) -> Bool {
    isDigit(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte | 0x20)
}
