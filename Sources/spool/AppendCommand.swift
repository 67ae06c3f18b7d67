import ArgumentParser
import Foundation
import Spool

/// `spool append DIR`: one record per line of standard input.
struct AppendCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "append",
        abstract: "Append one record per line of standard input.",
        discussion: """
            With --ack, prints each record's seq on its own line once it is durable at the chosen \
            level (written: survives kill -9; synced: survives power loss). Input is read in chunks \
            and a chunk's records share one write (and one fdatasync at synced). Exits 0 at the end \
            of input after a final sync.
            """)

    @OptionGroup var log: LogDirectory

    @Option(help: "How durable a record must be before it is acknowledged: buffered, written or synced.")
    var durability: Durability = .written

    @Flag(help: "Print each record's seq once it is durable at --durability.")
    var ack = false

    /// Small segments for `spool crash-test --corrupt`, so damage can hit sealed segments.
    @Option(help: .hidden)
    var segmentSize: Int?

    func run() throws {
        var configuration = Configuration()
        if let segmentSize { configuration.segmentSize = segmentSize }
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
            if ack, let first, let last {
                try eventLog.waitUntilBlocking(last, is: durability)
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
}
