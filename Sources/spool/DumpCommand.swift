import ArgumentParser
import Spool

/// `spool dump DIR`: every record as `seq<TAB>payload`.
struct DumpCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dump",
        abstract: "Print records, one per line: the seq, a tab, the payload.",
        discussion: """
            Payloads that are not UTF-8 free of control characters (a tab aside: no line break, \
            no terminal escape) are printed as base64: and their base64. Ranges \
            that cannot be read (corrupt, dropped, missing; expired too with --consumer) are reported on standard error, \
            and dump goes on past them: it exits 0 once it has read to the end. `spool verify` is the check \
            (exit 1 on corruption). With --follow, dump waits at the end for new records and prints \
            them as they are written (by `spool append` or an app, in another process), until \
            interrupted or --limit records: what it prints is written, not yet durable, \
            and a record that a writer is still writing is never printed half. --consumer --commit \
            works beside a writing process too (as a committer of its own: the records it prints \
            are made durable first). For a group (DIR/writers/*), each writer's records follow a \
            '# writer NAME (log ID)' line; --writer NAME reads one writer's log. With --format json, \
            each record is one JSON object a line: seq, time (RFC 3339, UTC, milliseconds), and data \
            (UTF-8 payloads, escaped by JSON) or data_base64, and writer in a group.
            """)

    @OptionGroup var log: LogDirectory

    @Option(help: "Start at this seq (default: the oldest stored record).")
    var from: UInt64?

    @Option(help: "Start at this consumer's committed offset.")
    var consumer: String?

    @Option(help: "Stop after this many records.")
    var limit: Int?

    @Flag(help: "With --consumer: read in batches and commit each batch after printing it (prints '# committed through SEQ').")
    var commit = false

    @Option(help: "With --commit: records per batch.")
    var batch: Int = 50

    @Flag(help: "Wait at the end for new records and print them as they are written, until interrupted (with --consumer --commit: committing each batch).")
    var follow = false

    @Option(help: "text: 'seq<TAB>payload' lines; json: one object a line (seq, time, and data or data_base64; the schema is in the command-line article).")
    var format: DumpFormat = .text

    func validate() throws {
        if from != nil && consumer != nil { throw ValidationError("give --from or --consumer, not both") }
        if commit && consumer == nil { throw ValidationError("--commit needs --consumer") }
        if batch < 1 { throw ValidationError("--batch must be at least 1") }
        if let limit, limit < 1 { throw ValidationError("--limit must be at least 1") }
    }

    func run() throws {
        if commit, let consumer {
            if follow {
                try followAndCommit(consumer)
                return
            }
            let opened = try log.openConsumer(consumer, creating: false)
            do {
                try consume(opened.consumer)
            } catch {
                try? opened.close()
                throw error
            }
            try opened.close()
            return
        }
        if follow {
            try followLog()
            return
        }
        if let writers = try log.groupWriters() {
            guard from == nil, consumer == nil, !follow else {
                throw ValidationError("\(log.directory) is a group of writer logs: give --writer NAME with --from, --consumer or --follow")
            }
            // Each writer's records under a line naming it (seqs are per writer log).
            var printed = 0
            for (name, member) in writers where printed < (limit ?? Int.max) {
                let snapshot = try member.snapshot()
                defer { snapshot.close() }
                // In JSON, each record names its writer instead.
                if format == .text { try Output.write("# writer \(name) (log \(snapshot.id))\n") }
                printed += try dump(snapshot, from: nil, limit: (limit ?? Int.max) - printed, writer: name)
            }
            if format == .text { try Output.write("# total: \(printed) records from \(writers.count) writer logs\n") }
            return
        }
        // Without --commit nothing is written: a snapshot, which repairs nothing.
        let snapshot = try log.snapshot()
        defer { snapshot.close() }
        var start = from
        if let consumer {
            try LogDirectory.requireConsumer(consumer, in: snapshot.consumerNames)
            start = snapshot.consumerOffsets[consumer]
        }
        _ = try dump(snapshot, from: start, limit: limit ?? Int.max)
    }

    /// Prints the snapshot's records from `start` (the oldest if nil), at most `limit`.
    /// - Returns: how many were printed.
    private func dump(_ snapshot: LogSnapshot, from start: UInt64?, limit: Int, writer: String? = nil) throws -> Int {
        let reader = snapshot.reader(from: start)
        var printer = Printer(format: format, writer: writer)
        while printer.printed < limit {
            let item: ReadItem?
            do { item = try reader.next() } catch {
                // A read that fails (a later segment of a newer version, a missing key) must not
                // take the records already read with it: they are printed before the error.
                try printer.flush()
                throw error
            }
            guard let item else { break }
            try printer.print(item)
        }
        try printer.flush()
        return printer.printed
    }

    /// `--follow --consumer NAME --commit`: the consumer's batches as they are written, each
    /// committed once printed, as a committer beside the writer (it never takes the writer's
    /// lock, so the writer may start while it runs); woken when the log's directory changes.
    private func followAndCommit(_ consumer: String) throws {
        let detached = try log.detachedConsumer(consumer, creating: false)
        defer { detached.close() }
        try consume(detached, waitingWith: detached.waitForChange)
    }

    /// Prints each batch the follower hands out as soon as it has it, for ever (or --limit).
    private func followLog() throws {
        var start = from
        if let consumer {
            let snapshot = try log.snapshot()
            defer { snapshot.close() }
            try LogDirectory.requireConsumer(consumer, in: snapshot.consumerNames)
            start = snapshot.consumerOffsets[consumer]
        }
        let follower = try log.follower(from: start)
        var printer = Printer(format: format)
        while printer.printed < (limit ?? Int.max) {
            let items = try follower.nextBatch(maxCount: min(1024, (limit ?? Int.max) - printer.printed))
            if items.isEmpty { break }
            for item in items { try printer.print(item) }
            try printer.flush()  // before the next wait: a follower prints what it has at once
        }
    }

    /// Reads the consumer's batches, prints each, then commits it durably: only once the
    /// output took it (and, for a file, made it durable), so a full disk never commits records
    /// that were not delivered. At the end it stops, or, given `wait`, waits for more.
    private func consume(_ consumer: any LogConsumer, waitingWith wait: (() throws -> Void)? = nil) throws {
        var printed = 0
        let printer = Printer(format: format)
        while printed < (limit ?? Int.max) {
            let next = try consumer.read(maxCount: min(batch, (limit ?? Int.max) - printed), maxBytes: 512 * 1024)
            if next.isEmpty {
                guard let wait else { break }
                try wait()
                continue
            }
            var out = ""
            for record in next.records { out += try printer.line(record) }
            for notice in next.notices { Output.error("# \(notice)") }
            try Output.write(out)
            try Output.sync()
            try consumer.commit(next)
            // The last seq, as people say it.
            try Output.write(format == .json ? try Output.jsonLine(CommittedThrough(committedThrough: next.endSeq - 1))
                             : "# committed through \(next.endSeq - 1)\n")
            printed += next.records.count
        }
    }
}

/// Records on standard output, one a line in `format`, written in 64 KiB pieces, and notices
/// on standard error in their place among them.
private struct Printer {
    let format: DumpFormat
    /// The writer log the records come from, in a group (named in each JSON object).
    var writer: String?
    private var out = ""
    private let encoder = Output.jsonEncoder()
    /// Records printed so far.
    private(set) var printed = 0

    init(format: DumpFormat, writer: String? = nil) {
        self.format = format
        self.writer = writer
    }

    /// The record's line: `seq<TAB>payload`, or its JSON object.
    func line(_ record: Record) throws -> String {
        switch format {
        case .text: "\(record.seq)\t\(printable(record.payload))\n"
        case .json: try Output.jsonLine(DumpedRecord(record, writer: writer), encoder: encoder)
        }
    }

    mutating func print(_ item: ReadItem) throws {
        switch item {
        case .record(let record):
            out += try line(record)
            printed += 1
            if out.utf8.count > 64 * 1024 { try flush() }
        case .notice(let notice):
            try flush()
            Output.error("# \(notice)")
        }
    }

    mutating func flush() throws {
        try Output.write(out)
        out.removeAll(keepingCapacity: true)
    }
}
