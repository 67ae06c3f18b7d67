import Foundation
import Spool

/// The corruption half of `spool crash-test --corrupt`: damages a copy of the log after a
/// round (a flipped bit, a zeroed range, a truncated header, garbage, empty and foreign files),
/// then reads it with real `spool dump` and `spool verify` children and checks that they never
/// crash or hang, that the damage is reported as exactly the damaged seq range, and that every
/// record outside it still reads, byte for byte.
struct CorruptionRound {
    /// One way to damage the copy.
    enum Damage: CaseIterable { case flipBit, zeroRange, truncateHeader, emptySegment, tornTail, garbageTail, foreignFiles }

    /// What the damage should cost: the seqs that may no longer read, and whether readers must
    /// report exactly them as corrupt (false: a torn tail, cut silently by recovery).
    struct Expectation {
        var lost: Range<UInt64>
        var reported: Bool
        var what: String
    }

    /// A block of a segment file: its offset, length and seqs.
    struct BlockSpan {
        var offset: Int
        var size: Int
        var seqs: Range<UInt64>
    }

    /// Parses the blocks of a segment, full (`SPBK`, FORMAT.md §3) and compact (`0xC5`, §3.2)
    /// alike (the files were just checked clean, so headers are trusted). Every block counts:
    /// a walk that stopped at the first compact block left the records after it out of the
    /// damage it predicts, so a tear among them was reported as losing what it did lose.
    static func blocks(of bytes: [UInt8]) -> [BlockSpan] {
        func le(_ at: Int, _ width: Int) -> UInt64 {
            (0..<width).reduce(UInt64(0)) { $0 | UInt64(bytes[at + $1]) << (8 * UInt64($1)) }
        }
        guard bytes.count >= 64 else { return [] }
        let base = le(16, 8)
        var spans = [BlockSpan]()
        var offset = 64
        while offset < bytes.count {
            let size: Int, seqs: Range<UInt64>
            if offset + 40 <= bytes.count, bytes[offset..<offset + 4].elementsEqual("SPBK".utf8) {
                size = 40 + Int(le(offset + 20, 4))
                let first = le(offset + 8, 8)
                seqs = first..<first + le(offset + 16, 4)
            } else if offset + 18 <= bytes.count, bytes[offset] == 0xC5 {
                size = 18 + Int(le(offset + 8, 2))
                let first = base + le(offset + 4, 4)
                seqs = first..<first + UInt64(bytes[offset + 2])
            } else {
                break
            }
            guard offset + size <= bytes.count else { break }
            spans.append(BlockSpan(offset: offset, size: size, seqs: seqs))
            offset += size
        }
        return spans
    }

    /// Damages `directory` (a copy of the log) in one seeded way and says what that should cost.
    /// Only segments that hold seqs at or past `floor` are damaged: retention may delete the
    /// others when the copy is opened.
    static func damage(_ directory: String, floor: UInt64, generator: inout SplitMix64) throws -> Expectation {
        let segments = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".seg") && $0.count == 24 && UInt64($0.dropLast(4)) != nil }.sorted()
        let eligible = segments.indices.filter { $0 == segments.count - 1 || baseSeq(segments[$0 + 1]) > floor }
        let withBlocks = eligible.filter { !blocks(of: read(directory + "/" + segments[$0])).isEmpty }
        var choices = Damage.allCases
        if withBlocks.isEmpty { choices = [.garbageTail, .foreignFiles] }
        if !withBlocks.contains(segments.count - 1) { choices.removeAll { $0 == .tornTail } }
        let sealed = eligible.filter { $0 < segments.count - 1 }
        if sealed.isEmpty { choices.removeAll { $0 == .truncateHeader || $0 == .emptySegment } }
        switch choices[Int(generator.next() % UInt64(choices.count))] {
        case .flipBit, .zeroRange:
            let index = withBlocks[Int(generator.next() % UInt64(withBlocks.count))]
            let path = directory + "/" + segments[index]
            var bytes = read(path)
            let spans = blocks(of: bytes)
            let victim = spans[Int(generator.next() % UInt64(spans.count))]
            var start = victim.offset + Int(generator.next() % UInt64(victim.size))
            // Zeros from a block's first byte to a 4 KiB boundary past the synced watermark are
            // what a page a power cut did not write back holds (FORMAT.md §6, "Holes a power cut
            // leaves"): read as missing, not corrupt. Damage starts past the first byte instead.
            if start == victim.offset && victim.size > 1 { start += 1 }
            let what: String
            if generator.next() % 2 == 0 {
                let bit = UInt8(1) << UInt8(generator.next() % 8)
                bytes[start] ^= bit
                what = "flipped bit \(bit) at \(segments[index])+\(start)"
            } else {
                let end = min(victim.offset + victim.size, start + 1 + Int(generator.next() % 64))
                // Zeroing bytes that are already zero changes nothing: make the first one nonzero.
                for i in start..<end { bytes[i] = 0 }
                if bytes[start..<end] == read(path)[start..<end] { bytes[start] = 0xA5 }
                what = "zeroed \(segments[index])+\(start)..<\(end)"
            }
            write(path, bytes)
            // The last block of the active segment is indistinguishable from a torn write: cut.
            let tornTail = index == segments.count - 1 && victim.offset == spans.last!.offset
            return Expectation(lost: victim.seqs, reported: !tornTail, what: what)
        case .truncateHeader, .emptySegment:
            let index = sealed[Int(generator.next() % UInt64(sealed.count))]
            let path = directory + "/" + segments[index]
            let cut = generator.next() % 2 == 0 ? 0 : Int(generator.next() % 64)
            write(path, Array(read(path).prefix(cut)))
            let base = baseSeq(segments[index])
            let next = baseSeq(segments[index + 1])
            return Expectation(lost: base..<next, reported: base < next, what: "cut sealed \(segments[index]) to \(cut) bytes")
        case .tornTail:
            // A write cut short: the active segment ends somewhere inside one of its blocks.
            let path = directory + "/" + segments.last!
            let bytes = read(path)
            let spans = blocks(of: bytes)
            guard let first = spans.first else { return Expectation(lost: 0..<0, reported: false, what: "nothing to tear") }
            let cut = first.offset + Int(generator.next() % UInt64(bytes.count - first.offset))
            write(path, Array(bytes.prefix(cut)))
            let torn = spans.filter { $0.offset + $0.size > cut }
            let lost = (torn.first?.seqs.lowerBound ?? 0)..<(torn.last?.seqs.upperBound ?? 0)
            return Expectation(lost: lost, reported: false, what: "tore \(segments.last!) at \(cut)")
        case .garbageTail:
            let path = directory + "/" + segments.last!
            let garbage = (0..<(1 + Int(generator.next() % 5000))).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            write(path, read(path) + garbage)
            return Expectation(lost: 0..<0, reported: false, what: "\(garbage.count) garbage bytes after \(segments.last!)")
        case .foreignFiles:
            write(directory + "/garbage.bin", (0..<4096).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
            write(directory + "/empty", [])
            write(directory + "/0000000000000000000x.seg", [1, 2, 3])
            try? FileManager.default.createDirectory(atPath: directory + "/consumers", withIntermediateDirectories: true)
            write(directory + "/consumers/zz.offset", [])
            return Expectation(lost: 0..<0, reported: false, what: "foreign, garbage and empty files")
        }
    }

    /// Copies the log, damages the copy, reads it with `spool dump` and `spool verify` children.
    /// `floor`: the lowest consumer offset; the copy's open may delete segments below it.
    static func run(executable: String, directory: String, stored: [UInt64: [UInt8]], floor: UInt64,
                    generator: inout SplitMix64) throws -> [String] {
        let copy = directory + ".corrupt"
        let scratch = directory + ".scratch"
        try? FileManager.default.removeItem(atPath: copy)
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer {
            try? FileManager.default.removeItem(atPath: copy)
            try? FileManager.default.removeItem(atPath: scratch)
        }
        try FileManager.default.copyItem(atPath: directory, toPath: copy)
        let expected = try damage(copy, floor: floor, generator: &generator)
        var problems = [String]()
        let dump = try ChildRun.run(executable, ["dump", copy], scratch: scratch)
        if dump.hung { return ["\(expected.what): spool dump hung"] }
        if dump.signaled { return ["\(expected.what): spool dump crashed (signal \(dump.status))"] }
        if dump.status != 0 { problems.append("\(expected.what): spool dump failed: \(dump.stderr.prefix(300))") }
        // Records: everything outside the damaged range, byte for byte; nothing inside it.
        var seen = Set<UInt64>()
        for line in dump.stdout.split(separator: "\n") {
            guard let tab = line.firstIndex(of: "\t"), let seq = UInt64(line[..<tab]) else {
                problems.append("\(expected.what): unexpected dump line \"\(line.prefix(40))\"")
                continue
            }
            seen.insert(seq)
            if expected.lost.contains(seq) { problems.append("\(expected.what): seq \(seq) in the damaged range was returned") }
            if stored[seq].map({ Array(line[line.index(after: tab)...].utf8) != $0 }) ?? true {
                problems.append("\(expected.what): seq \(seq) differs from what was stored")
            }
            if problems.count > 20 { return problems }
        }
        for seq in stored.keys.sorted() where seq >= floor && !expected.lost.contains(seq) && !seen.contains(seq) {
            problems.append("\(expected.what): seq \(seq), outside the damage, does not read")
            if problems.count > 20 { return problems }
        }
        // Notices: exactly the damaged range as corrupt, or none for a torn tail. A torn tail's
        // records that a consumer (the sync children's) had already passed are gone from under
        // its offset: the snapshot reports those as missing, which is right, and only those.
        func range(after prefix: String, in line: Substring) -> Range<UInt64>? {
            let bounds = line.dropFirst(prefix.count).prefix { $0 != " " }.components(separatedBy: "..<")
            guard bounds.count == 2, let low = UInt64(bounds[0]), let high = UInt64(bounds[1]), low < high else { return nil }
            return low..<high
        }
        let ranges = dump.stderr.split(separator: "\n").compactMap { line -> Range<UInt64>? in
            guard line.hasPrefix("# corrupt ") else {
                if !expected.reported, line.hasPrefix("# missing "), let missing = range(after: "# missing ", in: line),
                   expected.lost.lowerBound <= missing.lowerBound, missing.upperBound <= expected.lost.upperBound {
                    return nil
                }
                // What the open's recovery repaired (a torn tail cut, an offset file reset) is
                // reported too, and is not a read notice.
                if line.hasPrefix("# ") && !line.hasPrefix("# recovery ") { problems.append("\(expected.what): unexpected notice \(line.prefix(120))") }
                return nil
            }
            return range(after: "# corrupt ", in: line)
        }
        let merged = ranges.sorted { $0.lowerBound < $1.lowerBound }.reduce(into: [Range<UInt64>]()) { out, range in
            if let last = out.last, last.upperBound == range.lowerBound { out[out.count - 1] = last.lowerBound..<range.upperBound } else { out.append(range) }
        }
        let want: [Range<UInt64>] = expected.reported && !expected.lost.isEmpty ? [expected.lost] : []
        if merged != want { problems.append("\(expected.what): reported corrupt \(merged), expected \(want)") }
        let verify = try ChildRun.run(executable, ["verify", copy], scratch: scratch)
        if verify.hung { problems.append("\(expected.what): spool verify hung") }
        if verify.signaled { problems.append("\(expected.what): spool verify crashed (signal \(verify.status))") }
        if !verify.signaled, !verify.hung, (verify.status == 0) == !want.isEmpty {
            problems.append("\(expected.what): spool verify exited \(verify.status) with \(want.isEmpty ? "no" : "") damage to report")
        }
        return problems
    }

    /// The base seq in a segment's name (`%020llu.seg`).
    private static func baseSeq(_ name: String) -> UInt64 { UInt64(name.dropLast(4)) ?? 0 }

    private static func read(_ path: String) -> [UInt8] { Array(FileManager.default.contents(atPath: path) ?? Data()) }
    private static func write(_ path: String, _ bytes: [UInt8]) { _ = FileManager.default.createFile(atPath: path, contents: Data(bytes)) }
}
