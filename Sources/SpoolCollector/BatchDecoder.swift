import Foundation
import Spool
import SpoolJSON

/// How a batch's records are laid out in its (decompressed) body.
enum BatchFormat: Sendable, Equatable {
    /// `application/json`: a JSON array of envelopes `{"id","seq","time","data"}` (with
    /// `"data_text":true` when `data` is a string standing for text that is not JSON, or
    /// `"data_base64"` in place of `data`: the record's bytes in standard base64).
    case json
    /// `application/x-ndjson`: the same envelopes, one per line.
    case ndjson
    /// `application/json` with `Spool-Encoding: raw`: a JSON array of the records themselves;
    /// element `i` has sequence number `first + i` from the `Spool-Batch` header. An element
    /// `{"data_base64":"<base64>"}` (that member only) stands for the bytes it decodes to.
    case raw

    /// The format named by the request's `Content-Type` (parameters ignored) and
    /// `Spool-Encoding` headers; `nil` when unsupported.
    init?(contentType: String?, spoolEncoding: String?) {
        let mediaType = contentType?.split(separator: ";", maxSplits: 1).first.map {
            $0.trimmingCharacters(in: .whitespaces).lowercased()
        }
        let encoding = spoolEncoding?.trimmingCharacters(in: .whitespaces).lowercased()
        switch (mediaType, encoding) {
        case ("application/json", nil), ("application/json", "envelope"): self = .json
        case ("application/json", "raw"): self = .raw
        case ("application/x-ndjson", nil), ("application/x-ndjson", "envelope"): self = .ndjson
        default: return nil
        }
    }
}

/// A batch refused with a 4xx status and a message for the sender (never a payload).
struct BatchRejection: Error, Sendable, Equatable {
    var status: Int
    var message: String

    static func badRequest(_ message: String) -> BatchRejection {
        BatchRejection(status: 400, message: message)
    }
}

/// Turns a decompressed body into records, checking it against its `Spool-Batch` header.
///
/// Envelopes must carry `id` (`"<log id>-<seq>"`, the header's log), `seq`, `time` (integers)
/// and either `data` (the record's JSON text; with `"data_text":true`, a string whose value is
/// the record's text) or `data_base64` (a string of standard, padded base64); their seqs must rise strictly, start at the header's first seq and end at its
/// last (a batch may skip seqs its log expired, so it may hold fewer records than the range,
/// never more). A raw batch must hold exactly one record per seq of the range. Stateless.
enum BatchDecoder {
    static func decode(_ body: [UInt8], format: BatchFormat, header: BatchHeader) throws(BatchRejection) -> [ReceivedRecord] {
        guard String(validating: body, as: UTF8.self) != nil else { throw .badRequest("the body is not valid UTF-8") }
        do {
            switch format {
            case .raw:
                let elements = try JSONScanner.arrayElements(of: body, in: body.indices)
                guard UInt64(elements.count) == header.count else {
                    throw BatchRejection.badRequest("the body holds \(elements.count) records; Spool-Batch names \(header.count)")
                }
                return try elements.enumerated().map { offset, range in
                    let seq = header.seqs.lowerBound + UInt64(offset)
                    if let binary = try base64Element(body, range, index: offset) {
                        return ReceivedRecord(logID: header.logID, seq: seq, time: nil, binary: binary)
                    }
                    return ReceivedRecord(logID: header.logID, seq: seq, time: nil, data: text(body, range))
                }
            case .json:
                let elements = try JSONScanner.arrayElements(of: body, in: body.indices)
                return try envelopes(body, elements, header: header)
            case .ndjson:
                return try envelopes(body, lines(of: body), header: header)
            }
        } catch let error as JSONScanError {
            throw .badRequest("malformed JSON at byte \(error.offset): \(error.message)")
        } catch let error as BatchRejection {
            throw error
        } catch {
            throw .badRequest("malformed body")
        }
    }

    /// The ranges of the lines of `body` that hold more than whitespace.
    static func lines(of body: [UInt8]) -> [Range<Int>] {
        var lines: [Range<Int>] = []
        var start = 0
        for index in body.indices where body[index] == UInt8(ascii: "\n") {
            lines.append(start..<index)
            start = index + 1
        }
        lines.append(start..<body.count)
        return lines.filter { range in body[range].contains { !JSONScanner.isWhitespace($0) } }
    }

    private static func envelopes(_ body: [UInt8], _ ranges: [Range<Int>], header: BatchHeader) throws -> [ReceivedRecord] {
        var records: [ReceivedRecord] = []
        records.reserveCapacity(ranges.count)
        // The seqs of the envelopes themselves (of the sending log): a forwarded record's own
        // seq is its origin's.
        var last: UInt64?
        for (index, range) in ranges.enumerated() {
            let (seq, record) = try envelope(body, range, header: header, index: index)
            if let previous = last {
                guard seq > previous else { throw BatchRejection.badRequest("record \(index): seq \(seq) does not follow \(previous)") }
            } else {
                guard seq == header.seqs.lowerBound else {
                    throw BatchRejection.badRequest("the first record has seq \(seq); Spool-Batch starts at \(header.seqs.lowerBound)")
                }
            }
            guard header.seqs.contains(seq) else {
                throw BatchRejection.badRequest("record \(index): seq \(seq) is outside Spool-Batch \(header.seqs)")
            }
            records.append(record)
            last = seq
        }
        guard let last, last == header.seqs.upperBound else {
            throw BatchRejection.badRequest("the body holds \(records.count) records ending at seq \(last.map { String($0) } ?? "none"); Spool-Batch ends at \(header.seqs.upperBound)")
        }
        return records
    }

    /// The members that carry a forwarded record's origin (a collector's log, FORMAT.md §11).
    static let originMembers = (id: "origin_id", seq: "origin_seq", time: "origin_time")

    /// One envelope: its own seq, and the record it carries (its origin's id, seq and time
    /// when it has `origin_id`).
    private static func envelope(_ body: [UInt8], _ range: Range<Int>, header: BatchHeader, index: Int) throws -> (UInt64, ReceivedRecord) {
        let members = try JSONScanner.objectMembers(of: body, in: range)
        func member(_ name: String) throws -> Range<Int> {
            guard let found = members.first(where: { holds(body, $0.key, name) }) else {
                throw BatchRejection.badRequest("record \(index) has no \"\(name)\"")
            }
            return found.value
        }
        guard let seq = BatchHeader.decimal(body[try member("seq")]) else {
            throw BatchRejection.badRequest("record \(index): seq is not an unsigned integer")
        }
        guard let time = signedInteger(body[try member("time")]) else {
            throw BatchRejection.badRequest("record \(index): time is not an integer")
        }
        let id = try member("id")
        let expectedID = "\"\(header.logID)-\(seq)\""
        guard holds(body, id, expectedID) else {
            throw BatchRejection.badRequest("record \(index): id is not \(expectedID)")
        }
        let origin = try origin(body, members, index: index)
        var record = try payload(body, members, logID: origin?.logID ?? header.logID, seq: origin?.seq ?? seq,
                                 time: origin == nil ? time : origin?.time, index: index)
        if let digest = origin?.conflict {
            guard OriginRecord.digest(of: record.payload) == digest else {
                throw BatchRejection.badRequest("record \(index): the digest of \(originMembers.id) is not that of its bytes")
            }
            record.conflict = true
        }
        return (seq, record)
    }

    /// The record an envelope carries, from its `data`, `data_text` or `data_base64`.
    private static func payload(_ body: [UInt8], _ members: [(key: Range<Int>, value: Range<Int>)], logID: String, seq recordSeq: UInt64,
                                time recordTime: Int64?, index: Int) throws -> ReceivedRecord {
        let data = members.first { holds(body, $0.key, "data") }
        let base64 = members.first { holds(body, $0.key, base64Member) }
        if let flag = members.first(where: { holds(body, $0.key, textMember) }), !holds(body, flag.value, "false") {
            guard holds(body, flag.value, "true"), let data, base64 == nil, body[data.value.lowerBound] == UInt8(ascii: "\"") else {
                throw BatchRejection.badRequest("record \(index): \"\(textMember)\" must be true or false, beside a \"data\" that is a string")
            }
            guard let value = JSONScanner.stringValue(body, data.value) else {
                throw BatchRejection.badRequest("record \(index): data holds a lone surrogate escape, which no text has")
            }
            return ReceivedRecord(logID: logID, seq: recordSeq, time: recordTime, text: String(decoding: value, as: UTF8.self))
        }
        switch (data, base64) {
        case (let data?, nil):
            return ReceivedRecord(logID: logID, seq: recordSeq, time: recordTime, data: text(body, data.value))
        case (nil, let base64?):
            return ReceivedRecord(logID: logID, seq: recordSeq, time: recordTime, binary: try decodeBase64(body, base64.value, index: index))
        case (nil, nil):
            throw BatchRejection.badRequest("record \(index) has no \"data\" (nor \"\(base64Member)\")")
        case (_?, _?):
            throw BatchRejection.badRequest("record \(index) has both \"data\" and \"\(base64Member)\"")
        }
    }

    /// A forwarded record's origin: `origin_id` (`"<32 lowercase hex digits>-<seq>"`, and for
    /// a conflict `~<16 lowercase hex digits>`, the digest of its bytes: FORMAT.md §11),
    /// `origin_seq` (the same seq) and `origin_time` (optional); nil when the envelope has no
    /// `origin_id` (and then it may have neither of the others).
    private static func origin(_ body: [UInt8], _ members: [(key: Range<Int>, value: Range<Int>)], index: Int) throws
        -> (logID: String, seq: UInt64, time: Int64?, conflict: UInt64?)? {
        func member(_ name: String) -> Range<Int>? {
            members.first { holds(body, $0.key, name) }?.value
        }
        guard let id = member(originMembers.id) else {
            guard member(originMembers.seq) == nil, member(originMembers.time) == nil else {
                throw BatchRejection.badRequest("record \(index) has an origin seq or time but no \"\(originMembers.id)\"")
            }
            return nil
        }
        let invalid = BatchRejection.badRequest("record \(index): \(originMembers.id) is not \"<32 lowercase hex digits>-<seq>\" (and ~<16 lowercase hex digits> for a conflict)")
        let text = body[id]
        guard text.count >= 36, text.first == UInt8(ascii: "\""), text.last == UInt8(ascii: "\"") else { throw invalid }
        let inner = text.dropFirst().dropLast()
        let isHex = { (byte: UInt8) in (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte) }
        let logID = inner.prefix(32)
        let seqAndDigest = inner.dropFirst(33).split(separator: UInt8(ascii: "~"), maxSplits: 1, omittingEmptySubsequences: false)
        guard logID.allSatisfy(isHex), inner.dropFirst(32).first == UInt8(ascii: "-"),
              let seq = seqAndDigest.first.flatMap({ BatchHeader.decimal($0) }) else { throw invalid }
        var conflict: UInt64?
        if seqAndDigest.count == 2 {
            let digest = seqAndDigest[1]
            guard digest.count == 16, digest.allSatisfy(isHex) else { throw invalid }
            conflict = UInt64(String(decoding: digest, as: UTF8.self), radix: 16)
        }
        guard let seqText = member(originMembers.seq), BatchHeader.decimal(body[seqText]) == seq else {
            throw BatchRejection.badRequest("record \(index): \(originMembers.seq) is missing or differs from \(originMembers.id)")
        }
        var time: Int64?
        if let timeText = member(originMembers.time) {
            guard let value = signedInteger(body[timeText]) else {
                throw BatchRejection.badRequest("record \(index): \(originMembers.time) is not an integer")
            }
            time = value
        }
        return (String(decoding: logID, as: UTF8.self), seq, time, conflict)
    }

    /// The member that carries a record's bytes, base64-encoded, when they are not valid UTF-8.
    static let base64Member = "data_base64"
    /// The member that says `data` is a JSON string whose value is the record's bytes (text
    /// that is not itself JSON), not the record's JSON text. Without it, or `false`, `data` is
    /// the record's JSON text (as every envelope before it said, ambiguously, for text).
    static let textMember = "data_text"

    /// The bytes of a raw element `{"data_base64":"…"}`; `nil` for any other element.
    private static func base64Element(_ body: [UInt8], _ range: Range<Int>, index: Int) throws -> [UInt8]? {
        guard body[range.lowerBound] == UInt8(ascii: "{") else { return nil }
        let members = try JSONScanner.objectMembers(of: body, in: range)
        guard let base64 = members.first(where: { holds(body, $0.key, base64Member) }) else { return nil }
        guard members.count == 1 else {
            throw BatchRejection.badRequest("record \(index): an element with \"\(base64Member)\" must have no other member")
        }
        return try decodeBase64(body, base64.value, index: index)
    }

    /// The bytes a `data_base64` value holds: a JSON string of standard, padded base64.
    private static func decodeBase64(_ body: [UInt8], _ range: Range<Int>, index: Int) throws -> [UInt8] {
        guard range.count >= 2, body[range.lowerBound] == UInt8(ascii: "\""),
              let bytes = Data(base64Encoded: Data(body[range.lowerBound + 1 ..< range.upperBound - 1])) else {
            throw BatchRejection.badRequest("record \(index): \(base64Member) is not a string of standard base64")
        }
        return Array(bytes)
    }

    /// Whether `body[range]` is exactly `text`'s UTF-8: one `memcmp`, not `elementsEqual`,
    /// which unspecialized (a debug build of the collector) is a generic loop per byte, run
    /// for every member name of every record.
    private static func holds(_ body: [UInt8], _ range: Range<Int>, _ text: String) -> Bool {
        var text = text
        return text.withUTF8 { expected in
            range.count == expected.count && (expected.isEmpty || body.withUnsafeBytes {
                memcmp($0.baseAddress! + range.lowerBound, expected.baseAddress!, expected.count) == 0
            })
        }
    }

    private static func signedInteger(_ digits: ArraySlice<UInt8>) -> Int64? {
        if digits.first == UInt8(ascii: "-") {
            guard let magnitude = BatchHeader.decimal(digits.dropFirst()), magnitude <= UInt64(Int64.max) + 1 else { return nil }
            return magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)
        }
        return BatchHeader.decimal(digits).flatMap { Int64(exactly: $0) }
    }

    /// The compacted JSON text of a value (the body was validated as UTF-8).
    private static func text(_ body: [UInt8], _ range: Range<Int>) -> String {
        String(decoding: JSONScanner.compacted(body, range), as: UTF8.self)
    }
}
