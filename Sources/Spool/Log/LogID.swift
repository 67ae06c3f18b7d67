/// A log's random 128-bit identity, made when the log is created.
///
/// `"<log id>-<seq>"` is a globally unique, stable id for every record: an uploader
/// sends it so a server can drop duplicates after a crash between upload and commit.
public struct LogID: Sendable, Hashable, CustomStringConvertible {
    // The 16 bytes big-endian in two words, kept inline: every record a sync reads carries
    // one or two ids, and an array here cost a reference count on each copy.
    private let high: UInt64
    private let low: UInt64

    /// The 16 bytes of the identity.
    public var bytes: [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(16)
        append(to: &out)
        return out
    }

    /// Appends the 16 bytes of the identity to `out`.
    public func append(to out: inout [UInt8]) {
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: high >> UInt64(shift))) }
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: low >> UInt64(shift))) }
    }

    /// Wraps 16 bytes. Traps if `bytes.count != 16` (a programmer error).
    public init<Bytes: Collection<UInt8>>(bytes: Bytes) {
        precondition(bytes.count == 16, "a LogID is 16 bytes")
        var words: (UInt64, UInt64) = (0, 0)
        for (index, byte) in bytes.enumerated() {
            if index < 8 { words.0 = words.0 << 8 | UInt64(byte) } else { words.1 = words.1 << 8 | UInt64(byte) }
        }
        (high, low) = words
    }

    /// A new random identity from the system's random number generator.
    public static func random() -> LogID {
        var generator = SystemRandomNumberGenerator()
        return LogID(bytes: (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// Parses 32 lowercase or uppercase hexadecimal digits.
    public init?(hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count == 32 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(16)
        var index = 0
        while index < 32 {
            guard let high = hexValue(digits[index]), let low = hexValue(digits[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        self.init(bytes: out)
    }

    /// 32 lowercase hexadecimal digits.
    public var description: String {
        let alphabet = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(32)
        for byte in bytes {
            out.append(alphabet[Int(byte >> 4)])
            out.append(alphabet[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The stable, globally unique id of the record `seq` of this log: `"<log id>-<seq>"`.
    public func eventID(seq: UInt64) -> String {
        "\(description)-\(seq)"
    }
}

func hexValue(_ c: UInt8) -> UInt8? {
    switch c {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
    default: return nil
    }
}
