import Spool

/// The records `spool append` appended and has not yet made durable at `--durability` (nor,
/// with `--ack`, acknowledged): a range of seqs, made durable and printed together.
struct Unacknowledged {
    let log: EventLog
    let durability: Durability
    /// Whether each seq is printed (`--ack`) once it is durable.
    let printing: Bool
    private var seqs: Range<UInt64>?
    private var text = ""

    init(log: EventLog, durability: Durability, printing: Bool) {
        self.log = log
        self.durability = durability
        self.printing = printing
    }

    /// Whether records wait to be made durable or acknowledged (so a linger is running).
    var isWaiting: Bool { seqs != nil && (printing || durability != .buffered) }

    /// Adds the record just appended (seqs are added in order).
    mutating func add(_ seq: UInt64) {
        seqs = (seqs?.lowerBound ?? seq)..<(seq + 1)
    }

    /// Blocks until every record added is durable at `durability`, then prints their seqs,
    /// one a line, with `printing`. Not for the cooperative pool.
    /// - Throws: the log's write error, or `.io` if standard output refuses the seqs.
    mutating func acknowledge() throws {
        guard let seqs else { return }
        self.seqs = nil
        try log.waitUntilBlocking(before: seqs.upperBound, is: durability)
        guard printing else { return }
        text.removeAll(keepingCapacity: true)
        for seq in seqs { text += "\(seq)\n" }
        try Output.write(text)
    }
}
