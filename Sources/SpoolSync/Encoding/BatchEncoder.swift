import Foundation
import Spool
import SpoolJSON

/// Lays records out as a request body, straight into `[UInt8]` (no `JSONEncoder`, no
/// intermediate strings: this is on the drain path).
///
/// - ``HTTPSink/Encoding/json``: `[<envelope>,<envelope>]`, where an envelope is
///   `{"id":"<log id>-<seq>","seq":<seq>,"time":<ms>,"data":<data>}`;
///   `{…,"time":<ms>,"data":"<text>","data_text":true}` for a record that is valid UTF-8 but
///   not one JSON text; or `{…,"time":<ms>,"data_base64":"<base64>"}` for a record that is not
///   valid UTF-8.
/// - ``HTTPSink/Encoding/ndjson``: `<envelope>\n` per record.
/// - ``HTTPSink/Encoding/raw``: `[<data>,<data>]`, where a record that is not one JSON
///   text is the element `{"data_base64":"<base64>"}`, and so is a record that is itself a
///   JSON object with a member named `data_base64` (so an element with that member always
///   stands for the bytes it decodes to, and every other element is a record's JSON text).
///
/// `<data>` is the record's own bytes, one valid JSON text (checked, never re-serialised; for
/// NDJSON its line breaks between tokens become spaces so each envelope stays on one line: the
/// same JSON value). `"<text>"` is the record as a JSON string (quotes, backslashes and control
/// characters escaped) whose value is exactly the record's bytes, and `"data_text":true` says
/// so: without it, the record `hello` and the record `"hello"` would travel alike.
/// `<base64>` is the record's exact bytes in standard base64 (RFC 4648 §4, padded). So no
/// record is changed on the way: a server gets every byte back.
///
/// With ``forwardsOrigins`` (the log is a collector's, its records `OriginRecord`s), each
/// record arrives unwrapped, as every sink's do (the worker unwraps each record it reads
/// once, ``RecordUnwrapper``; the `Record` overloads unwrap with ``unwrapper``), and an
/// envelope also carries
/// the record's origin, after `time`:
/// `"origin_id":"<device log id>-<seq>","origin_seq":<seq>,"origin_time":<ms>` (`origin_time`
/// only when the origin has a time), and the origin's payload goes out as `data`, `data` with
/// `data_text` or `data_base64`, as any record's bytes do. A record that does not decode as an
/// origin record goes out as ``OutgoingRecord`` says: as any other record would, without
/// origin members.
///
/// Thread safety: a value type; use freely from any task.
public struct BatchEncoder: Sendable {
    /// The body layout.
    public let encoding: HTTPSink.Encoding
    /// Whether the records are `OriginRecord`s whose origin each envelope carries.
    public let forwardsOrigins: Bool
    private let logID: LogID
    private let idPrefix: [UInt8]

    /// An encoder for the records of one log.
    ///
    /// - Parameters:
    ///   - logID: the log the records come from (their ids are `"<log id>-<seq>"`).
    ///   - encoding: the body layout.
    ///   - forwardsOrigins: the records are `OriginRecord`s (a collector's log): each
    ///     envelope carries its origin. The default is `false`. Traps with the raw encoding,
    ///     which has no envelope to carry it (a programmer error; ``SyncConfiguration/validate()``
    ///     refuses that pair).
    public init(logID: LogID, encoding: HTTPSink.Encoding, forwardsOrigins: Bool = false) {
        precondition(!(forwardsOrigins && encoding == .raw), "the raw encoding cannot carry origin records' ids")
        self.encoding = encoding
        self.forwardsOrigins = forwardsOrigins
        self.logID = logID
        self.idPrefix = Array("{\"id\":\"\(logID)-".utf8)
    }

    /// The `Content-Type` of bodies this encoder makes.
    public var contentType: String {
        encoding == .ndjson ? "application/x-ndjson" : "application/json"
    }

    /// How the `Record` overloads unwrap what they are given: as records of the log the encoder
    /// was made for, a collector's log when ``forwardsOrigins`` is set (the worker hands ``HTTPSink`` records
    /// it unwrapped this same way).
    public var unwrapper: RecordUnwrapper { RecordUnwrapper(logID: logID, origins: forwardsOrigins) }

    /// Encodes the longest prefix of `records` whose body stays within `maxBytes`, and at
    /// least one record (a record larger than `maxBytes` is sent alone).
    ///
    /// - Returns: the body and how many records it holds (0 only when `records` is empty).
    /// - Complexity: O(total payload bytes).
    public func encode(_ records: [OutgoingRecord], maxBytes: Int) -> (body: [UInt8], count: Int) {
        records.withUnsafeBufferPointer { encode($0, maxBytes: maxBytes) }
    }

    /// Encodes a slice of unwrapped records, as the array overload does.
    public func encode(_ records: ArraySlice<OutgoingRecord>, maxBytes: Int) -> (body: [UInt8], count: Int) {
        records.withUnsafeBufferPointer { encode($0, maxBytes: maxBytes) }
    }

    /// Encodes records as read from the log: each is unwrapped by ``unwrapper``, then encoded as
    /// the ``OutgoingRecord`` overload does.
    ///
    /// - Complexity: O(total payload bytes).
    public func encode(_ records: [Record], maxBytes: Int) -> (body: [UInt8], count: Int) {
        encode(unwrapper.unwrap(records), maxBytes: maxBytes)
    }

    /// Encodes a slice of records as read, as the array overload does.
    public func encode(_ records: ArraySlice<Record>, maxBytes: Int) -> (body: [UInt8], count: Int) {
        encode(unwrapper.unwrap(records), maxBytes: maxBytes)
    }

    /// Encodes any collection of records as read, as the array overload does.
    public func encode(_ records: some Collection<Record>, maxBytes: Int) -> (body: [UInt8], count: Int) {
        encode(unwrapper.unwrap(records), maxBytes: maxBytes)
    }

    /// The one encoding loop, over contiguous records: concrete, so that a caller in another
    /// module does not walk a generic collection through witness tables, a record at a time
    /// (that cost as much as checking the records' JSON).
    private func encode(_ records: UnsafeBufferPointer<OutgoingRecord>, maxBytes: Int) -> (body: [UInt8], count: Int) {
        var body = [UInt8]()
        body.reserveCapacity(min(maxBytes, records.reduce(2) { $0 + $1.bytes.count + 80 }))
        let isArray = encoding != .ndjson
        if isArray { body.append(UInt8(ascii: "[")) }
        var count = 0
        for record in records {
            let mark = body.count
            if count > 0, isArray { body.append(UInt8(ascii: ",")) }
            append(record, to: &body)
            if count > 0, body.count + (isArray ? 1 : 0) > maxBytes {
                body.removeSubrange(mark...)
                break
            }
            count += 1
        }
        if isArray { body.append(UInt8(ascii: "]")) }
        return (body, count)
    }

    /// Appends one record as read, unwrapped by ``unwrapper``, as the ``OutgoingRecord``
    /// overload does.
    public func append(_ record: Record, to body: inout [UInt8]) {
        append(unwrapper.unwrap(record), to: &body)
    }

    /// Appends one record in this encoding (an envelope plus its newline for NDJSON, the
    /// envelope for JSON, the data for raw: the bytes it carries), without array punctuation.
    public func append(_ record: OutgoingRecord, to body: inout [UInt8]) {
        switch encoding {
        case .json:
            appendEnvelope(record, to: &body, oneLine: false)
        case .ndjson:
            appendEnvelope(record, to: &body, oneLine: true)
            body.append(UInt8(ascii: "\n"))
        case .raw:
            if record.bytes.withUnsafeBufferPointer(JSONValidator.isValid), !Self.readsAsBase64Element(record.bytes) {
                body.append(contentsOf: record.bytes)
            } else {
                body.append(UInt8(ascii: "{"))
                Self.appendBase64Member(record.bytes, to: &body)
                body.append(UInt8(ascii: "}"))
            }
        }
    }

    /// Appends the envelope `{"id":…,"seq":…,"time":…,"data":…}` (or `"data_base64":…` last):
    /// the record's own id, seq and time in the drained log (``OutgoingRecord/stored``), then,
    /// for a record unwrapped from an origin record, its origin's id, seq and time, then the
    /// bytes the ``OutgoingRecord`` carries.
    func appendEnvelope(_ outgoing: OutgoingRecord, to body: inout [UInt8], oneLine: Bool) {
        let record = outgoing.stored
        if outgoing.source == logID {
            body.append(contentsOf: idPrefix)
        } else {
            body.append(contentsOf: "{\"id\":\"\(outgoing.source)-".utf8)
        }
        appendDecimal(record.seq, to: &body)
        body.append(contentsOf: #"","seq":"#.utf8)
        appendDecimal(record.seq, to: &body)
        body.append(contentsOf: #","time":"#.utf8)
        appendSigned(record.timestamp, to: &body)
        if outgoing.isOrigin {
            body.append(contentsOf: #","origin_id":""#.utf8)
            body.append(contentsOf: outgoing.id.utf8)
            body.append(contentsOf: #"","origin_seq":"#.utf8)
            appendDecimal(outgoing.seq, to: &body)
            if let time = outgoing.time {
                body.append(contentsOf: #","origin_time":"#.utf8)
                appendSigned(time, to: &body)
            }
        }
        body.append(UInt8(ascii: ","))
        Self.appendDataMembers(outgoing.bytes, to: &body, oneLine: oneLine)
        body.append(UInt8(ascii: "}"))
    }

    private func appendSigned(_ value: Int64, to body: inout [UInt8]) {
        if value < 0 { body.append(UInt8(ascii: "-")) }
        appendDecimal(value.magnitude, to: &body)
    }

    /// The member a record that is not valid UTF-8 travels in, in every encoding.
    static let base64Member = "data_base64"
    /// The member that says `data` is a JSON string standing for the record's bytes, not the
    /// record's own JSON text (FORMAT.md's "Wire format").
    static let textMember = "data_text"

    /// Appends an envelope's data members: `"data":<the payload>` when it is one valid JSON
    /// text, `"data":"<the payload as a JSON string>","data_text":true` when it is other
    /// UTF-8, else `"data_base64":"<base64>"`.
    static func appendDataMembers(_ payload: [UInt8], to body: inout [UInt8], oneLine: Bool) {
        let mark = body.count
        body.append(contentsOf: #""data":"#.utf8)
        switch appendData(payload, to: &body, oneLine: oneLine) {
        case .json:
            break
        case .text:
            body.append(contentsOf: ",\"\(textMember)\":true".utf8)
        case nil:
            body.removeSubrange(mark...)
            appendBase64Member(payload, to: &body)
        }
    }

    /// Appends `"data_base64":"<the payload in standard base64>"`.
    static func appendBase64Member(_ payload: [UInt8], to body: inout [UInt8]) {
        body.append(contentsOf: "\"\(base64Member)\":\"".utf8)
        body.append(contentsOf: Data(payload).base64EncodedData())
        body.append(UInt8(ascii: "\""))
    }

    /// How ``appendData(_:to:oneLine:)`` wrote a payload.
    enum DataForm {
        /// The payload's own JSON text.
        case json
        /// A JSON string whose value is the payload (valid UTF-8, not one JSON text).
        case text
    }

    /// Appends a payload as JSON: its bytes if they are valid JSON, else a JSON string whose
    /// value is exactly the payload.
    ///
    /// - Returns: which of the two it wrote; `nil`, with `body` unchanged, when the payload is
    ///   not valid UTF-8 (no JSON value holds those bytes).
    static func appendData(_ payload: [UInt8], to body: inout [UInt8], oneLine: Bool) -> DataForm? {
        payload.withUnsafeBufferPointer { bytes in
            guard JSONValidator.isValid(bytes) else {
                return JSONString.append(bytes, to: &body) ? .text : nil
            }
            guard oneLine, bytes.contains(where: { $0 == 0x0A || $0 == 0x0D }) else {
                body.append(contentsOf: bytes)
                return .json
            }
            // Valid JSON holds raw line breaks only as whitespace between tokens.
            for byte in bytes { body.append(byte == 0x0A || byte == 0x0D ? 0x20 : byte) }
            return .json
        }
    }

    /// Whether a payload, embedded as it is in a raw body, would read as a base64 element: it
    /// is a JSON object with a member named `data_base64`, however the key is escaped. Such a
    /// record is sent base64-encoded itself, so raw elements stay unambiguous.
    ///
    /// - Complexity: O(payload bytes); a payload is parsed only when it is an object holding
    ///   `data_base64` or a `\u` escape (the only ways to spell that key).
    static func readsAsBase64Element(_ payload: [UInt8]) -> Bool {
        guard payload.first(where: { !isJSONWhitespace($0) }) == UInt8(ascii: "{") else { return false }
        guard contains(base64Key, in: payload) || contains(unicodeEscape, in: payload) else { return false }
        guard payload.withUnsafeBufferPointer(JSONValidator.isValid) else { return false }  // not JSON: base64 anyway
        // Nested deeper than the scanner reads: base64 is the safe side.
        guard let object = try? JSONScanner.singleValue(of: payload, in: payload.indices),
              let members = try? JSONScanner.objectMembers(of: payload, in: object) else { return true }
        return members.contains { JSONScanner.stringValue(payload, $0.key.lowerBound - 1 ..< $0.key.upperBound + 1) == base64Key }
    }
}

private let base64Key = Array(BatchEncoder.base64Member.utf8)
private let unicodeEscape = Array(#"\u"#.utf8)

@inline(__always)
private func isJSONWhitespace(_ byte: UInt8) -> Bool {
    byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
}

private func contains(_ needle: [UInt8], in haystack: [UInt8]) -> Bool {
    guard haystack.count >= needle.count else { return false }
    return (0...(haystack.count - needle.count)).contains { haystack[$0..<$0 + needle.count].elementsEqual(needle) }
}

/// Appends the decimal digits of `value`.
@inline(__always)
func appendDecimal(_ value: UInt64, to body: inout [UInt8]) {
    if value < 10 {
        body.append(UInt8(ascii: "0") + UInt8(value))
        return
    }
    var digits: (UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0)  // 40 bytes ≥ 20 digits
    withUnsafeMutableBytes(of: &digits) { buffer in
        var remaining = value
        var index = buffer.count
        while remaining > 0 {
            index -= 1
            buffer[index] = UInt8(ascii: "0") + UInt8(remaining % 10)
            remaining /= 10
        }
        body.append(contentsOf: buffer[index...])
    }
}
