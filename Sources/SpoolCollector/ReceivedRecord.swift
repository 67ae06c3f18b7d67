/// One record as the collector received it.
public struct ReceivedRecord: Sendable, Hashable {
    /// The sending log's id: 32 lowercase hexadecimal digits.
    public var logID: String
    /// The record's sequence number in its log.
    public var seq: UInt64
    /// The record's timestamp (ms since the Unix epoch) from its envelope; `nil` for the raw
    /// encoding, which carries no envelope.
    public var time: Int64?
    /// The record's JSON text as sent, with the whitespace between tokens removed.
    public var data: String

    public init(logID: String, seq: UInt64, time: Int64?, data: String) {
        self.logID = logID
        self.seq = seq
        self.time = time
        self.data = data
    }

    /// The record's globally unique id: `"<log id>-<seq>"`.
    public var id: String { "\(logID)-\(seq)" }

    /// The record as one NDJSON line: `{"id":…,"seq":…,"time":…,"data":…}` and a newline
    /// (`time` is left out when `nil`).
    var ndjsonLine: String {
        var line = #"{"id":""# + id + #"","seq":"# + String(seq)
        if let time { line += #","time":"# + String(time) }
        line += #","data":"# + data + "}\n"
        return line
    }
}
