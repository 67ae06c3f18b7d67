import ArgumentParser
import Spool

/// `spool commit DIR --consumer NAME --through SEQ`.
struct CommitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "commit",
        abstract: "Commit a consumer's offset through a seq (durably).",
        discussion: """
            Works beside a process that has the log open for writing (an app, `spool append`): \
            the commit is then made as a committer of its own (the data through SEQ synced first), \
            and the writer's retention honours it.
            """)

    @OptionGroup var log: LogDirectory

    @Option(help: "The consumer's name.")
    var consumer: String

    @Flag(help: LogDirectory.createConsumerHelp)
    var create = false

    @Option(help: "The last seq to mark as consumed; the next read starts after it.")
    var through: UInt64

    func run() throws {
        if log.hasLiveWriter {
            let detached = try log.detachedConsumer(consumer, creating: create)
            defer { detached.close() }
            try detached.commit(through: through)
            try Output.write("\(consumer): committed through \(through); next seq \(detached.committed)\n")
            return
        }
        let eventLog = try log.open()
        defer { try? eventLog.close() }
        if !eventLog.consumerNames.contains(consumer) {
            if !create { try LogDirectory.requireConsumer(consumer, in: eventLog.consumerNames) }
            // Checked before the consumer is made: a refused commit must not leave a new
            // consumer behind, holding retention back.
            guard through < eventLog.nextSeq else {
                let last = eventLog.nextSeq == 0 ? "none" : String(eventLog.nextSeq - 1)
                throw SpoolError(.invalidCommit, "cannot commit \(consumer) through \(through); the last appended record is \(last)")
            }
            // A new consumer starts at the oldest stored record: a commit below it goes backwards.
            guard through &+ 1 >= eventLog.firstSeq else {
                throw SpoolError(.invalidCommit, "cannot commit \(consumer) through \(through): a new consumer starts at the oldest stored record, \(eventLog.firstSeq), and an offset never moves backwards")
            }
        }
        let named = try eventLog.consumer(named: consumer)
        try named.commit(through: through)
        try Output.write("\(consumer): committed through \(through); next seq \(named.committed)\n")
        try eventLog.close()
    }
}
