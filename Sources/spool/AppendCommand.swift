import ArgumentParser
import Foundation
import Spool

/// `spool append DIR`: one record per line of standard input.
struct AppendCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "append",
        abstract: "Append one record per line of standard input.",
        discussion: """
            Input is read in chunks; a chunk's records share one write (and one fdatasync at \
            synced), and the next chunk is read once they are durable at --durability (written: \
            survives kill -9; synced: survives power loss; buffered: no wait). With --ack, prints \
            each record's seq on its own line once it is. Exits 0 at the end of input after a \
            final sync. With --dictionary, new blocks are compressed with that zstd dictionary \
            (stored in the log's dictionaries/ directory, unencrypted); with --key-file, they are \
            encrypted with the key --key-id names (or the file's only key).
            """)

    @OptionGroup var log: LogDirectory

    @Option(help: "How durable a record must be before it is acknowledged: buffered, written or synced.")
    var durability: Durability = .written

    @Flag(help: "Print each record's seq once it is durable at --durability.")
    var ack = false

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

    func run() throws {
        var configuration = Configuration()
        if let segmentSize { configuration.segmentSize = segmentSize }
        configuration.maxBytes = maxBytes
        try configureCodec(&configuration)
        let eventLog = try log.open(configuration, creating: true)
        defer { try? eventLog.close() }
        var buffer = [UInt8](repeating: 0, count: 256 * 1024)
        var partial = [UInt8]()
        var acks = ""
        while true {
            let n = buffer.withUnsafeMutableBytes { Foundation.read(0, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw SpoolError(.io, "reading standard input failed")
            }
            if n == 0 { break }
            var first: UInt64?
            var last: UInt64?
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
                if first == nil { first = seq }
                last = seq
                start = i + 1
            }
            // A line without its end yet: refused as soon as it is too long to be a record,
            // before it can take memory without bound.
            guard partial.count + (n - start) <= configuration.maxRecordSize else {
                throw SpoolError(.recordTooLarge, "a line of input is longer than Configuration.maxRecordSize (\(configuration.maxRecordSize) bytes)")
            }
            partial.append(contentsOf: buffer[start..<n])
            if let last, ack || durability != .buffered {
                try eventLog.waitUntilBlocking(last, is: durability)
            }
            if ack, let first, let last {
                acks.removeAll(keepingCapacity: true)
                for seq in first...last { acks += "\(seq)\n" }
                try Output.write(acks)
            }
        }
        if !partial.isEmpty {
            let seq = try eventLog.append(partial)
            if ack {
                try eventLog.waitUntilBlocking(seq, is: durability)
                try Output.write("\(seq)\n")
            }
        }
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
