import Foundation
import Spool

/// One record as the collector received it.
public struct ReceivedRecord: Sendable, Hashable {
    /// The sending log's id: 32 lowercase hexadecimal digits.
    public var logID: String
    /// The record's sequence number in its log.
    public var seq: UInt64
    /// The record's timestamp (ms since the Unix epoch) from its envelope; `nil` for the raw
    /// encoding, which carries no envelope.
    public var time: Int64?
    /// The record's JSON text as sent, with the whitespace between tokens removed; `nil` for a
    /// record sent as `data_base64` (bytes that are not valid UTF-8), held in ``binary``, or
    /// as text (`"data_text":true`), held in ``text``.
    public var data: String?
    /// The exact bytes of a record sent as `data_base64`; `nil` for one sent otherwise.
    public var binary: [UInt8]?
    /// The exact text of a record that is not JSON, sent as a JSON string with
    /// `"data_text":true` (the string's value); `nil` for one sent otherwise.
    public var text: String?
    /// Whether the record is a conflict: another record of its log id and seq, with other
    /// bytes, was stored first (here, or by the collector that forwarded it). It is stored
    /// under an id of its own (``id``). `false` for a record received the first time.
    public var conflict = false

    /// A record sent as JSON (`data`).
    public init(logID: String, seq: UInt64, time: Int64?, data: String) {
        self.logID = logID
        self.seq = seq
        self.time = time
        self.data = data
    }

    /// A record sent as text that is not JSON (`data` a string, `"data_text":true`).
    public init(logID: String, seq: UInt64, time: Int64?, text: String) {
        self.logID = logID
        self.seq = seq
        self.time = time
        self.text = text
    }

    /// A record sent as bytes (`data_base64`).
    public init(logID: String, seq: UInt64, time: Int64?, binary: [UInt8]) {
        self.logID = logID
        self.seq = seq
        self.time = time
        self.binary = binary
    }

    /// The record's globally unique id: `"<log id>-<seq>"`, and for a ``conflict``
    /// `"<log id>-<seq>~<16 hex digits>"`, the digest of its bytes (FORMAT.md §11).
    public var id: String { "\(logID)-\(seq)" + (conflict ? OriginRecord.conflictSuffix(digest: digest) : "") }

    /// The digest of the record's bytes (`OriginRecord.digest(of:)`).
    var digest: UInt64 { OriginRecord.digest(of: payload) }

    /// The record's bytes: its JSON text, its text, or its binary bytes.
    var payload: [UInt8] { binary ?? Array((text ?? data ?? "null").utf8) }

    /// The number of the record's bytes (``payload``'s count, without building it).
    var payloadCount: Int { binary?.count ?? (text ?? data)?.utf8.count ?? 4 }

    /// Whether the record holds `marker`: in its JSON text or text, or in its bytes.
    func contains(_ marker: String) -> Bool {
        if let data = text ?? data { return data.contains(marker) }
        let needle = Array(marker.utf8)
        guard let binary, binary.count >= needle.count else { return needle.isEmpty }
        return (0...(binary.count - needle.count)).contains { binary[$0..<$0 + needle.count].elementsEqual(needle) }
    }

    /// The record as one NDJSON line: `{"id":…,"seq":…,"time":…,"data":…}` and a newline
    /// (`time` is left out when `nil`; `"data_base64":"<standard base64>"` in place of `data`
    /// for a record sent that way, and `data` a JSON string with `"data_text":true` for a
    /// text record, so the file keeps every record's exact bytes).
    var ndjsonLine: String {
        var line = #"{"id":""# + id + #"","seq":"# + String(seq)
        if let time { line += #","time":"# + String(time) }
        if let binary {
            line += #","data_base64":""# + Data(binary).base64EncodedString() + "\"}\n"
        } else if let text {
            line += #","data":""# + Collector.jsonEscaped(text) + #"","data_text":true}"# + "\n"
        } else {
            line += #","data":"# + (data ?? "null") + "}\n"
        }
        return line
    }
}
