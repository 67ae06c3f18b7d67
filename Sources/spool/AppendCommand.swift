import ArgumentParser
import Foundation
import Spool

/// `spool append DIR`: one record per line of standard input.
struct AppendCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "append",
        abstract: "Append one record per line of standard input.",
        discussion: """
            Input is read as it arrives; the records that arrive within --linger of the first one \
            not yet durable share one write (full blocks, compressed like the library's: a steady \
            producer's lines are not written a few at a time) and one fdatasync at synced, and \
            are then durable at --durability (written: survives kill -9; synced: survives power \
            loss; buffered: no wait, written within --linger). With --ack, prints each record's \
            seq on its own line once it is: at most --linger plus one write after its line arrived. Exits 0 at the end of input after a \
            final sync. With --dictionary, new blocks are compressed with that zstd dictionary \
            (stored in the log's dictionaries/ directory, unencrypted); with --key-file, they are \
            encrypted with the key --key-id names (or the file's only key).
            """)

    @OptionGroup var log: LogDirectory

    @Option(help: "How durable a record must be before it is acknowledged: buffered, written or synced.")
    var durability: Durability = .written

    @Flag(help: "Print each record's seq once it is durable at --durability.")
    var ack = false

    @Option(help: ArgumentHelp("How long records are gathered, from the first one not yet durable, before they are written together (0: write each chunk of input at once).", valueName: "ms"))
    var linger = AppendCommand.defaultLinger

    /// The default `--linger`, in milliseconds: the library's own `Configuration.linger`.
    static let defaultLinger = 10

    @Option(help: ArgumentHelp("Compress new blocks with this zstd dictionary (from `zstd --train`, or raw content; 8 bytes to 1 MiB).", valueName: "path"))
    var dictionary: String?

    @Option(help: ArgumentHelp("Encrypt new blocks with this key of --key-file (default: the file's only key).", valueName: "id"))
    var keyID: UInt32?

    /// Small segments for `spool crash-test --corrupt`, so damage can hit sealed segments.
    @Option(help: .hidden)
    var segmentSize: Int?

    /// A cap (with `dropOldest`), so live-read tests see retention delete segments under readers.
    @Option(help: .hidden)
    var maxBytes: Int?

    func validate() throws {
        guard (0...60_000).contains(linger) else { throw ValidationError("--linger must be between 0 and 60000 milliseconds, not \(linger)") }
    }

    func run() throws {
        var configuration = Configuration()
        if let segmentSize { configuration.segmentSize = segmentSize }
        configuration.maxBytes = maxBytes
        // One linger for both paths: buffered blocks wait as long as written ones gather.
        configuration.linger = .milliseconds(linger)
        try configureCodec(&configuration)
        let eventLog = try log.open(configuration, creating: true)
        defer { try? eventLog.close() }
        let input = StandardInput()
        var buffer = [UInt8](repeating: 0, count: 256 * 1024)
        var partial = [UInt8]()
        var unacknowledged = Unacknowledged(log: eventLog, durability: durability, printing: ack)
        // Records are gathered from the first one not yet acknowledged until the linger ends
        // (or input does), then written (and, with --ack, acknowledged) together.
        var lingerEnd: ContinuousClock.Instant?
        while true {
            if let end = lingerEnd, ContinuousClock.now >= end || !input.waitForInput(until: end) {
                try unacknowledged.acknowledge()
                lingerEnd = nil
                continue
            }
            let n = try input.read(into: &buffer)
            if n == 0 { break }
            var start = 0
            for i in 0..<n where buffer[i] == UInt8(ascii: "\n") {
                let seq: UInt64
                if partial.isEmpty {
                    seq = try buffer.withUnsafeBytes { try eventLog.append(UnsafeRawBufferPointer(rebasing: $0[start..<i])) }
                } else {
                    partial.append(contentsOf: buffer[start..<i])
                    seq = try eventLog.append(partial)
                    partial.removeAll(keepingCapacity: true)
                }
                unacknowledged.add(seq)
                start = i + 1
            }
            // A line without its end yet: refused as soon as it is too long to be a record,
            // before it can take memory without bound.
            guard partial.count + (n - start) <= configuration.maxRecordSize else {
                throw SpoolError(.recordTooLarge, "a line of input is longer than Configuration.maxRecordSize (\(configuration.maxRecordSize) bytes)")
            }
            partial.append(contentsOf: buffer[start..<n])
            if unacknowledged.isWaiting && lingerEnd == nil {
                lingerEnd = ContinuousClock.now + configuration.linger
            }
        }
        if !partial.isEmpty { unacknowledged.add(try eventLog.append(partial)) }
        try unacknowledged.acknowledge()
        try eventLog.syncBlocking()
        try eventLog.close()
    }

    /// `--dictionary` and the key `--key-id` names (or the only one) of `--key-file` as the
    /// codec of new blocks.
    private func configureCodec(_ configuration: inout Configuration) throws {
        if let dictionary {
            guard let bytes = FileManager.default.contents(atPath: dictionary) else {
                throw ValidationError("cannot read the dictionary \(dictionary)")
            }
            configuration.dictionary = .provided(Array(bytes))
        }
        guard let keys = try log.keys() else {
            if keyID != nil { throw ValidationError("--key-id needs --key-file") }
            return
        }
        let current: UInt32
        if let keyID {
            guard keys[keyID] != nil else { throw ValidationError("--key-id \(keyID) is not a key of the key file") }
            current = keyID
        } else if keys.count == 1, let only = keys.keys.first {
            current = only
        } else {
            throw ValidationError("the key file holds \(keys.count) keys: give --key-id to choose the one new blocks are encrypted with")
        }
        configuration.encryption = .init(keys: keys, current: current)
    }
}
