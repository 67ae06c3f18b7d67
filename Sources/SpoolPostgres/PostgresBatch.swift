import PostgresNIO

/// One request of ``PostgresSink``: its rows as six arrays in PostgreSQL's binary format,
/// the parameters of one `INSERT … SELECT FROM unnest(…)`.
///
/// Encoded once by `prepare`, off the worker's actor; sending it again after a retry copies
/// the arrays into the bind message and encodes nothing.
public struct PostgresBatch: Sendable {
    /// `id`, `log_id`, `seq`, `time`, `data` and `data_bytes`, in the table's column order.
    let columns: [BinaryArray]
    /// How many rows it carries.
    let count: Int
    /// The row of a one-row request whose record went to `data`: if PostgreSQL refuses it
    /// (`jsonb` refuses some JSON texts `isJSONB` takes, such as `1e999999`, beyond `numeric`),
    /// the sink inserts it again with its bytes in `data_bytes`. `nil` otherwise.
    let loneJSONBRow: PostgresTableRow?

    /// Encodes `rows`: a record `jsonb` takes goes to `data` (unless `jsonb` is false), any
    /// other to `data_bytes`.
    init(rows: [PostgresTableRow], jsonb: Bool = true) {
        var ids = BinaryArray(element: .text, count: rows.count)
        var logIDs = BinaryArray(element: .text, count: rows.count)
        var seqs = BinaryArray(element: .int8, count: rows.count)
        var times = BinaryArray(element: .timestamptz, count: rows.count)
        var data = BinaryArray(element: .jsonb, count: rows.count)
        var dataBytes = BinaryArray(element: .bytea, count: rows.count)
        var lastJSONB: PostgresTableRow?
        for row in rows {
            ids.append(utf8: row.id)
            logIDs.append(utf8: row.logID)
            seqs.append(int64: row.seq)
            // timestamptz: microseconds since 2000-01-01T00:00:00Z.
            if let micros = row.milliseconds.flatMap(Self.postgresMicroseconds) { times.append(int64: micros) } else { times.appendNull() }
            if jsonb, PostgresTableRow.isJSONB(row.bytes) {
                data.append(jsonb: row.bytes)
                dataBytes.appendNull()
                lastJSONB = row
            } else {
                data.appendNull()
                dataBytes.append(bytes: row.bytes)
            }
        }
        columns = [ids, logIDs, seqs, times, data, dataBytes]
        count = rows.count
        loneJSONBRow = rows.count == 1 ? lastJSONB : nil
    }

    /// `timestamptz`'s binary form of `milliseconds` since 1970: microseconds since
    /// 2000-01-01T00:00:00Z; `nil` when that overflows.
    static func postgresMicroseconds(_ milliseconds: Int64) -> Int64? {
        let (since2000, borrow) = milliseconds.subtractingReportingOverflow(postgresEpochMilliseconds)
        let (micros, overflow) = since2000.multipliedReportingOverflow(by: 1000)
        return borrow || overflow ? nil : micros
    }

    /// 2000-01-01T00:00:00Z in milliseconds since 1970: PostgreSQL's epoch.
    static let postgresEpochMilliseconds: Int64 = 946_684_800_000

    /// The statement's bindings.
    var bindings: PostgresBindings {
        var bindings = PostgresBindings(capacity: columns.count)
        for column in columns { bindings.append(column) }
        return bindings
    }
}

/// A one-dimensional array in PostgreSQL's binary format (`array_recv`), written element by
/// element: a header (dimensions, null flag, element type, length, lower bound), then each
/// element as a 32-bit length (-1 for null) and its bytes.
struct BinaryArray: PostgresDynamicTypeEncodable, Sendable {
    /// An element type and the type of its array.
    struct Element: Sendable {
        var oid: UInt32
        var arrayType: PostgresDataType
        static let text = Element(oid: 25, arrayType: .textArray)
        static let int8 = Element(oid: 20, arrayType: .int8Array)
        static let timestamptz = Element(oid: 1184, arrayType: .timestamptzArray)
        static let jsonb = Element(oid: 3802, arrayType: .jsonbArray)
        static let bytea = Element(oid: 17, arrayType: .byteaArray)
    }

    private(set) var buffer: ByteBuffer
    private let element: Element
    /// Where the has-null flag is, to set it when a null is appended.
    private static let nullFlagIndex = 4

    init(element: Element, count: Int) {
        self.element = element
        buffer = ByteBufferAllocator().buffer(capacity: 20 + count * 16)
        buffer.writeInteger(Int32(1))  // dimensions
        buffer.writeInteger(Int32(0))  // has nulls: set by appendNull
        buffer.writeInteger(element.oid)
        buffer.writeInteger(Int32(count))  // the length: `count` elements are appended
        buffer.writeInteger(Int32(1))  // lower bound
    }

    mutating func appendNull() {
        buffer.setInteger(Int32(1), at: Self.nullFlagIndex)
        buffer.writeInteger(Int32(-1))
    }

    mutating func append(utf8 text: String) {
        let lengthIndex = buffer.writerIndex
        buffer.writeInteger(Int32(0))
        let length = buffer.writeString(text)
        buffer.setInteger(Int32(length), at: lengthIndex)
    }

    mutating func append(int64 value: Int64) {
        buffer.writeInteger(Int32(8))
        buffer.writeInteger(value)
    }

    mutating func append(bytes: [UInt8]) {
        buffer.writeInteger(Int32(bytes.count))
        buffer.writeBytes(bytes)
    }

    /// `jsonb`'s binary form: the version byte 1, then the JSON text.
    mutating func append(jsonb bytes: [UInt8]) {
        buffer.writeInteger(Int32(bytes.count + 1))
        buffer.writeInteger(UInt8(1))
        buffer.writeBytes(bytes)
    }

    var psqlType: PostgresDataType { element.arrayType }
    var psqlFormat: PostgresFormat { .binary }

    func encode<JSONEncoder: PostgresJSONEncoder>(into byteBuffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>) {
        byteBuffer.writeImmutableBuffer(buffer)
    }
}
