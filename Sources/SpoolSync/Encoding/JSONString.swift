import SpoolJSON

/// Writes bytes as a JSON string literal (RFC 8259 §7).
///
/// `"` and `\` are escaped, control characters become `\b \f \n \r \t` or `\u00XX`, and
/// UTF-8 is copied as it is: the string's value is exactly the bytes. Bytes that are not valid
/// UTF-8 have no such string, so they are refused rather than replaced.
enum JSONString {
    private static let hex = Array("0123456789abcdef".utf8)

    /// Appends `bytes` as a JSON string literal.
    ///
    /// - Returns: `false`, with `body` as it was, when `bytes` are not valid UTF-8.
    static func append(_ bytes: UnsafeBufferPointer<UInt8>, to body: inout [UInt8]) -> Bool {
        let mark = body.count
        body.append(UInt8(ascii: "\""))
        var index = 0
        var runStart = 0
        func flush(_ end: Int, _ body: inout [UInt8]) {
            if end > runStart { body.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<end])) }
        }
        while index < bytes.count {
            let byte = bytes[index]
            if byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") {
                index += 1
                continue
            }
            if byte >= 0x80 {
                guard let length = UTF8Validation.sequenceLength(bytes, at: index) else {
                    body.removeSubrange(mark...)
                    return false
                }
                index += length
                continue
            }
            flush(index, &body)
            switch byte {
            case UInt8(ascii: "\""): body.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): body.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x08: body.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x0C: body.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0x0A: body.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: body.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: body.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            default:
                body.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                body.append(hex[Int(byte >> 4)])
                body.append(hex[Int(byte & 0x0F)])
            }
            index += 1
            runStart = index
        }
        flush(index, &body)
        body.append(UInt8(ascii: "\""))
        return true
    }
}
