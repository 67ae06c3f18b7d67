import ArgumentParser
import Foundation
import Spool

/// `spool dump --format`: how each record is printed.
enum DumpFormat: String, ExpressibleByArgument, CaseIterable {
    /// `seq<TAB>payload` (a payload that is not printable text as `base64:` and its base64).
    case text
    /// One JSON object a line (``DumpedRecord``).
    case json
}

/// A record as `spool dump --format json` prints it: one object a line. The payload is `data`
/// when it is UTF-8 (JSON escapes any control character, so it is safe on a terminal), else
/// `data_base64`; exactly one of them is present.
struct DumpedRecord: Encodable {
    var seq: UInt64
    /// When it was appended: RFC 3339 in UTC with milliseconds, `2026-11-27T19:57:30.123Z`.
    var time: String
    var data: String?
    var dataBase64: String?
    /// The writer log it comes from, in a group's dump; absent otherwise.
    var writer: String?

    init(_ record: Record, writer: String?) {
        seq = record.seq
        time = Date(timeIntervalSince1970: Double(record.timestamp) / 1000)
            .formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
        if let text = String(validating: record.payload, as: UTF8.self) {
            data = text
        } else {
            dataBase64 = Data(record.payload).base64EncodedString()
        }
        self.writer = writer
    }
}

/// `spool dump --consumer --commit --format json`'s line after each committed batch.
struct CommittedThrough: Encodable {
    /// The last seq committed.
    var committedThrough: UInt64
}
