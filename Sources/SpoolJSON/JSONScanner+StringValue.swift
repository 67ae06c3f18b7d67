extension JSONScanner {
    /// The value of the JSON string `bytes[range]` (its quotes included), as UTF-8 bytes:
    /// every escape resolved, every other byte copied.
    ///
    /// `range` must hold one string the scanner accepted (so its escapes are well formed) in a
    /// body already validated as UTF-8.
    /// - Returns: `nil` when the string has no UTF-8 value: a `\u` escape of a lone surrogate
    ///   (a high one not followed by a low one's escape, or a low one alone).
    /// - Complexity: O(range.count).
    package static func stringValue(_ bytes: [UInt8], _ range: Range<Int>) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(range.count)
        var index = range.lowerBound + 1
        let end = range.upperBound - 1
        /// The code unit of the `\uXXXX` escape at `at`, if there is one.
        func unit(at start: Int) -> UInt32? {
            guard start + 6 <= end, bytes[start] == UInt8(ascii: "\\"), bytes[start + 1] == UInt8(ascii: "u") else { return nil }
            var value: UInt32 = 0
            for byte in bytes[start + 2 ..< start + 6] {
                guard let digit = hexValue(byte) else { return nil }
                value = value << 4 | digit
            }
            return value
        }
        while index < end {
            let byte = bytes[index]
            guard byte == UInt8(ascii: "\\") else {
                out.append(byte)
                index += 1
                continue
            }
            let escape = bytes[index + 1]
            guard escape == UInt8(ascii: "u") else {
                switch escape {
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                default: out.append(escape)  // \" \\ \/
                }
                index += 2
                continue
            }
            guard let first = unit(at: index) else { return nil }
            var scalarValue = first
            index += 6
            switch first {
            case 0xD800...0xDBFF:
                guard let low = unit(at: index), (0xDC00...0xDFFF).contains(low) else { return nil }
                scalarValue = 0x10000 + ((first - 0xD800) << 10) + (low - 0xDC00)
                index += 6
            case 0xDC00...0xDFFF:
                return nil
            default:
                break
            }
            guard let scalar = Unicode.Scalar(scalarValue) else { return nil }
            UTF8.encode(scalar) { out.append($0) }
        }
        return out
    }

    private static func hexValue(_ byte: UInt8) -> UInt32? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(byte - UInt8(ascii: "A") + 10)
        default: nil
        }
    }
}
