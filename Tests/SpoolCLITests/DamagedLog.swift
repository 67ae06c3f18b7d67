import Foundation
import Testing

/// A log whose active segment holds five blocks of 100 records (five appends), with
/// one byte of block 2's payload flipped: records 100..<200 no longer read, the other 400 do.
enum DamagedLog {
    /// Writes the log at `directory` (a writer log of a group when `writer` is given) and
    /// damages its second block.
    /// - Returns: the damaged segment's file name.
    @discardableResult
    static func make(_ directory: String, writer: String? = nil) throws -> String {
        for block in 0..<5 {
            let lines = (0..<100).map { #"{"n":\#(block * 100 + $0)}"# }.joined(separator: "\n") + "\n"
            // A linger of 2 s: the 100 lines share one block even when a loaded machine reads
            // them in pieces (the input ends long before, and its end writes at once).
            let append = try SpoolBinary.run(["append", directory, "--ack", "--linger", "2000"] + (writer.map { ["--writer", $0] } ?? []), input: Data(lines.utf8))
            try #require(append.status == 0, "\(append.stderr)")
        }
        let log = writer.map { "\(directory)/writers/\($0)" } ?? directory
        let name = try #require(try FileManager.default.contentsOfDirectory(atPath: log).filter { $0.hasSuffix(".seg") }.sorted().last)
        let path = log + "/" + name
        var bytes = [UInt8](try #require(FileManager.default.contents(atPath: path)))
        let blocks = self.blocks(bytes)
        try #require(blocks.count == 5, "the active segment holds \(blocks.count) blocks, not 5")
        bytes[blocks[1].payload + blocks[1].length / 2] ^= 0xFF
        try #require(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        return name
    }

    /// Where each block's payload starts and how long it is, walking the headers from the
    /// segment header (FORMAT.md §2, §3, §3.2): a full header starts with `S` (40 bytes, stored
    /// length a u32 at 20), a compact one with `0xC5` (18 bytes, stored length a u16 at 8).
    static func blocks(_ bytes: [UInt8]) -> [(payload: Int, length: Int)] {
        func little(_ at: Int, _ width: Int) -> Int { (0..<width).reduce(0) { $0 | Int(bytes[at + $1]) << (8 * $1) } }
        var found: [(payload: Int, length: Int)] = []
        var offset = 64
        while offset + 18 <= bytes.count {
            let (header, length): (Int, Int)
            switch bytes[offset] {
            case 0x53 where offset + 40 <= bytes.count: (header, length) = (40, little(offset + 20, 4))
            case 0xC5: (header, length) = (18, little(offset + 8, 2))
            default: return found
            }
            guard length > 0, offset + header + length <= bytes.count else { return found }
            found.append((offset + header, length))
            offset += header + length
        }
        return found
    }
}
