/// One record read back from a log.
///
/// `seq` is dense and never reused; `timestamp` is the wall-clock time of the
/// `append` call in milliseconds since the Unix epoch; `payload` is exactly the
/// bytes that were appended.
public struct Record: Sendable, Hashable {
    /// The record's sequence number: the first record of a new log is 0.
    public var seq: UInt64
    /// Milliseconds since 1970-01-01T00:00:00Z, taken when `append` was called.
    public var timestamp: Int64
    /// The bytes that were appended, unchanged.
    public var payload: [UInt8]

    /// A record as the log stores it.
    public init(seq: UInt64, timestamp: Int64, payload: [UInt8]) {
        self.seq = seq
        self.timestamp = timestamp
        self.payload = payload
    }
}

/// How durable a record must be before `append` returns.
public enum Durability: String, Sendable, CaseIterable, Codable {
    /// Returns at once. The record reaches the file within `Configuration.linger`
    /// or when its block fills. A killed process loses the records not yet written.
    case buffered
    /// Returns once the block holding the record was written to the segment file:
    /// the record survives the process being killed (`kill -9`), not power loss.
    case written
    /// Returns once the block was made durable (`fdatasync` on Linux,
    /// `fcntl(F_FULLFSYNC)` on Apple platforms): the record survives power loss.
    case synced
}
