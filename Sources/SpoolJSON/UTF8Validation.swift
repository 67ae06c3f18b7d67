/// Well-formed UTF-8 (Unicode Table 3-7): no overlongs, no surrogates, nothing past U+10FFFF.
package enum UTF8Validation {
    /// The length of the well-formed sequence starting at `index` (whose first byte is
    /// ≥ 0x80) and ending before `end`, or `nil` if it is ill-formed.
    @inline(__always)
    package static func sequenceLength(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int, end: Int? = nil) -> Int? {
        let end = end ?? bytes.count
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
            guard index + offset < end, range.contains(bytes[index + offset]) else { return nil }
            offset += 1
        }
        return offset
    }
}

/// Eight bytes at a time, as one 64-bit word ("SIMD within a register").
package enum SWAR {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highs: UInt64 = 0x8080_8080_8080_8080

    /// A high bit in each byte of `word` below `limit` (≤ 0x80), and possibly in bytes above
    /// such a byte (a borrow): zero exactly when no byte is below `limit`.
    @inline(__always)
    package static func bytesBelow(_ limit: UInt8, in word: UInt64) -> UInt64 {
        (word &- ones &* UInt64(limit)) & ~word & highs
    }

    /// A high bit in the first byte of `word` (in memory order, little-endian) that a JSON
    /// string cannot hold as it is without a look: `"`, `\`, a control character or a byte
    /// of a multi-byte sequence; zero if there is none. Bytes after the first such one may be
    /// flagged too (borrows), so only the lowest flag is meaningful.
    @inline(__always)
    package static func stringBytesNeedingALook(_ word: UInt64) -> UInt64 {
        let quote = bytesBelow(1, in: word ^ (ones &* 0x22))
        let backslash = bytesBelow(1, in: word ^ (ones &* 0x5C))
        let control = bytesBelow(0x20, in: word)
        return quote | backslash | control | (word & highs)
    }
}
