import ArgumentParser
import Spool

/// `spool compact DIR`: cold recompression of every sealed segment now.
struct CompactCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compact",
        abstract: "Rewrite the log's sealed segments in larger blocks at a higher zstd level (cold recompression; fewer bytes, the same records).",
        discussion: """
            Each sealed segment is rewritten once (FORMAT.md §2.1): written beside it as a \
            temporary file, synced, then renamed over it, so a crash or a kill at any point \
            leaves the old file or the new one, both whole. Segments every consumer has passed, \
            damaged ones and ones already rewritten are left as they are; the active segment is \
            never rewritten. It takes the writer's lock: run it when no other process has the \
            log open for writing (an app sets Configuration.coldCompression to do this itself).
            """)

    @OptionGroup var log: LogDirectory

    @Option(help: "The zstd level of rewritten blocks (1 to 22).")
    var level: Int32 = ColdCompression().level

    @Option(help: "Uncompressed bytes of records per rewritten block (65536 to 16777216).")
    var blockSize: Int = ColdCompression().blockSize

    @OptionGroup var output: JSONOption

    /// What `--json` prints.
    struct Summary: Encodable {
        var segmentsRewritten: Int
        var bytesBefore: Int64
        var bytesAfter: Int64
        var diskBytes: Int64
    }

    func run() throws {
        var configuration = Configuration()
        configuration.coldCompression = ColdCompression(level: level, blockSize: blockSize, inBackground: false)
        let opened = try log.open(configuration)
        let report: RecompressionReport
        do {
            report = try opened.recompressSealedSegments()
        } catch {
            try? opened.close()
            throw error
        }
        let diskBytes = opened.stats().diskBytes
        try opened.close()
        if output.json {
            try Output.writeJSON(Summary(segmentsRewritten: report.segmentsRewritten, bytesBefore: report.bytesBefore,
                                         bytesAfter: report.bytesAfter, diskBytes: diskBytes))
        } else {
            let saved = report.bytesBefore == 0 ? 0 : 100 * Double(report.bytesBefore - report.bytesAfter) / Double(report.bytesBefore)
            try Output.write("rewrote \(report.segmentsRewritten) sealed segments: \(report.bytesBefore) → \(report.bytesAfter) bytes (\(String(format: "%.1f", saved))% saved); the log holds \(diskBytes) bytes\n")
        }
    }
}
