import Spool
import SpoolSync

/// One row of the sink's table, before it is encoded: what a record becomes.
///
/// The table is `(id text primary key, log_id text not null, seq bigint not null,
/// time timestamptz, data jsonb, data_bytes bytea)`: `data` holds the record when it is JSON
/// PostgreSQL's `jsonb` takes, `data_bytes` its exact bytes otherwise.
struct PostgresTableRow: Sendable, Equatable {
    /// `<log id>-<seq>`: the primary key that makes a repeated batch harmless.
    var id: String
    /// The log the record was appended to (32 hexadecimal digits).
    var logID: String
    /// The record's seq in that log.
    var seq: Int64
    /// Milliseconds since 1970, when the record was appended (`nil`: an origin record
    /// that arrived without a time).
    var milliseconds: Int64?
    /// The record's exact bytes.
    var bytes: [UInt8]

    /// Whether PostgreSQL's `jsonb` takes `bytes` as they are: one valid JSON text (UTF-8,
    /// nesting within Spool's limit) with no `\u0000` escape and no unpaired surrogate escape,
    /// which `jsonb` refuses although JSON allows them. Such records go to `data_bytes`.
    static func isJSONB(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer { buffer in
            JSONValidator.isValid(buffer) && !hasEscapeJSONBRefuses(buffer)
        }
    }

    /// Whether valid JSON text holds `\u0000`, or a `\uD800`–`\uDFFF` escape that is not a
    /// high surrogate followed by a low one. Every backslash of valid JSON starts an escape
    /// inside a string, so a single scan of escapes is exact.
    static func hasEscapeJSONBRefuses(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        let count = bytes.count
        /// The value of `\uXXXX` at `at`, if there is one.
        func escape(at start: Int) -> UInt32? {
            guard start + 6 <= count, bytes[start] == UInt8(ascii: "\\"), bytes[start + 1] == UInt8(ascii: "u") else { return nil }
            var value: UInt32 = 0
            for offset in 2..<6 {
                guard let digit = hexDigit(bytes[start + offset]) else { return nil }
                value = value << 4 | UInt32(digit)
            }
            return value
        }
        while index < count {
            guard bytes[index] == UInt8(ascii: "\\") else {
                index += 1
                continue
            }
            guard let value = escape(at: index) else {
                index += 2  // a two-character escape: \" \\ \/ \b \f \n \r \t
                continue
            }
            switch value {
            case 0:
                return true
            case 0xD800...0xDBFF:
                guard let low = escape(at: index + 6), (0xDC00...0xDFFF).contains(low) else { return true }
                index += 12
            case 0xDC00...0xDFFF:
                return true
            default:
                index += 6
            }
        }
        return false
    }

    private static func hexDigit(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

extension PostgresTableRow {
    /// The row of a record as destinations receive it (an `OutgoingRecord`, as the worker
    /// unwrapped it once for every sink when it read the batch): its id, log id, seq, time and
    /// exact bytes, so a record keeps one id from the device to the table.
    init(_ record: OutgoingRecord) {
        self.init(id: record.id, logID: record.log.description, seq: Int64(bitPattern: record.seq),
                  milliseconds: record.time, bytes: record.bytes)
    }
}
