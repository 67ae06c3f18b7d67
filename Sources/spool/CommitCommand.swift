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
        // `--through` is the last seq consumed, as people say it; the offset is the next one.
        guard through < UInt64.max else { throw SpoolError(.invalidCommit, "cannot commit \(consumer) through \(through)") }
        let opened = try log.openConsumer(consumer, creating: create) { first, next in
            // Checked before the consumer is made: a refused commit must not leave a new
            // consumer behind, holding retention back.
            guard through < next else {
                throw SpoolError(.invalidCommit, "cannot commit \(consumer) through \(through); the last appended record is \(next == 0 ? "none" : String(next - 1))")
            }
            // A new consumer starts at the oldest stored record: a commit below it goes backwards.
            guard through + 1 >= first else {
                throw SpoolError(.invalidCommit, "cannot commit \(consumer) through \(through): a new consumer starts at the oldest stored record, \(first), and an offset never moves backwards")
            }
        }
        do {
            try opened.consumer.commit(upTo: through + 1)
            try Output.write("\(consumer): committed through \(through); next seq \(opened.consumer.committed)\n")
        } catch {
            try? opened.close()
            throw error
        }
        try opened.close()
    }
}
