import Foundation
import Spool
import SpoolSync

/// One publish request, encoded.
public struct PublishRequest: Sendable {
    /// The log and seqs of the records it holds.
    public var batch: BatchID
    /// The JSON body: `{"messages":[…]}`.
    public var body: [UInt8]
    /// How many messages it holds.
    public var messages: Int
    /// The size of its largest message, encoded.
    public var largestMessage: Int
}

/// Lays records out as a Pub/Sub publish body, straight into bytes.
///
/// A message is `{"data":"<base64>","attributes":{"id":"<log>-<seq>","seq":"<seq>",
/// "log":"<log>","time":"<ms>"},"orderingKey":"<log>"}` (no `orderingKey` without one): the
/// id, seq, log, time and bytes of each record's `OutgoingRecord`, as the worker unwrapped it
/// when it read the batch, so for a collector's log the device record's stand in place of the
/// collector log's own. The encoder decodes nothing itself.
struct PublishEncoder: Sendable {
    let logID: LogID
    let orderingKey: String?

    private static let open = Array(#"{"messages":["#.utf8)
    private static let close = Array("]}".utf8)

    /// The longest prefix of `records` within `maxBytes` and `maxCount` messages, at least one.
    /// Its ``PublishRequest/batch`` names the seqs as read from the drained log.
    func encode(_ records: ArraySlice<OutgoingRecord>, maxBytes: Int, maxCount: Int) -> PublishRequest {
        var body = Self.open
        var count = 0
        var largest = 0
        for record in records {
            guard count < maxCount else { break }
            let encoded = message(for: record)
            if count > 0, body.count + 1 + encoded.count + Self.close.count > maxBytes { break }
            if count > 0 { body.append(UInt8(ascii: ",")) }
            body += encoded
            largest = max(largest, encoded.count)
            count += 1
        }
        body += Self.close
        let first = records[records.startIndex].stored.seq
        let batch = BatchID(log: records[records.startIndex].source, first: first, last: records[records.startIndex + count - 1].stored.seq)
        return PublishRequest(batch: batch, body: body, messages: count, largestMessage: largest)
    }

    /// One message.
    func message(for record: OutgoingRecord) -> [UInt8] {
        var message = Array(#"{"data":""#.utf8)
        message += Array(Data(record.bytes).base64EncodedString().utf8)
        message += Array(#"","attributes":{"id":""#.utf8) + Array(record.id.utf8)
        message += Array(#"","seq":""#.utf8) + Array(String(record.seq).utf8)
        message += Array(#"","log":""#.utf8) + Array(record.log.description.utf8)
        if let time = record.time { message += Array(#"","time":""#.utf8) + Array(String(time).utf8) }
        message += Array("\"}".utf8)
        if let orderingKey { message += Array(#","orderingKey":""#.utf8) + Array(orderingKey.utf8) + [UInt8(ascii: "\"")] }
        message.append(UInt8(ascii: "}"))
        return message
    }
}
