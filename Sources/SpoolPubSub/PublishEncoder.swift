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
    /// Why its lone record cannot be published, when it cannot (a collector log's record that
    /// does not decode); never a payload.
    public var unpublishable: String?
}

/// Lays records out as a Pub/Sub publish body, straight into bytes.
///
/// A message is `{"data":"<base64>","attributes":{"id":"<log>-<seq>","seq":"<seq>",
/// "log":"<log>","time":"<ms>"},"orderingKey":"<log>"}` (no `orderingKey` without one). For a
/// collector's log, the device record's id, seq, log, time and bytes stand in place of the
/// collector log's own.
struct PublishEncoder: Sendable {
    let logID: LogID
    let origins: Bool
    let orderingKey: String?

    private static let open = Array(#"{"messages":["#.utf8)
    private static let close = Array("]}".utf8)

    /// The longest prefix of `records` within `maxBytes` and `maxCount` messages, at least one.
    /// A record of a collector's log that does not decode travels alone, marked unpublishable.
    func encode(_ records: ArraySlice<Record>, maxBytes: Int, maxCount: Int) -> PublishRequest {
        var body = Self.open
        var count = 0
        var largest = 0
        var unpublishable: String?
        loop: for record in records {
            guard count < maxCount else { break }
            switch message(for: record) {
            case .failure(let error):
                // Alone, so that the worker dead-letters it and nothing else.
                if count == 0 { unpublishable = "\(error)"; count = 1 }
                break loop
            case .success(let message):
                if count > 0, body.count + 1 + message.count + Self.close.count > maxBytes { break loop }
                if count > 0 { body.append(UInt8(ascii: ",")) }
                body += message
                largest = max(largest, message.count)
                count += 1
            }
        }
        body += Self.close
        let first = records[records.startIndex].seq
        let batch = BatchID(log: logID, first: first, last: records[records.startIndex + count - 1].seq)
        return PublishRequest(batch: batch, body: body, messages: count, largestMessage: largest, unpublishable: unpublishable)
    }

    /// One message, or why the record cannot be one.
    func message(for record: Record) -> Result<[UInt8], SpoolError> {
        let id: String, seq: UInt64, log: String, time: Int64?, payload: [UInt8]
        if origins {
            let origin: OriginRecord
            do { origin = try OriginRecord.decode(record.payload) } catch { return .failure(error) }
            (id, seq, log, time, payload) = (origin.id, origin.seq, origin.log.description, origin.time, origin.payload)
        } else {
            (id, seq, log, time, payload) = (logID.eventID(seq: record.seq), record.seq, logID.description, record.timestamp, record.payload)
        }
        var message = Array(#"{"data":""#.utf8)
        message += Array(Data(payload).base64EncodedString().utf8)
        message += Array(#"","attributes":{"id":""#.utf8) + Array(id.utf8)
        message += Array(#"","seq":""#.utf8) + Array(String(seq).utf8)
        message += Array(#"","log":""#.utf8) + Array(log.utf8)
        if let time { message += Array(#"","time":""#.utf8) + Array(String(time).utf8) }
        message += Array("\"}".utf8)
        if let orderingKey { message += Array(#","orderingKey":""#.utf8) + Array(orderingKey.utf8) + [UInt8(ascii: "\"")] }
        message.append(UInt8(ascii: "}"))
        return .success(message)
    }
}
