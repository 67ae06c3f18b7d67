import CISAL
import Foundation
import Spool

// How a fuzz input becomes a log directory, and what reading it gives: shared by the `SpoolFuzz`
// target (libFuzzer and replay) and by `FuzzCorpusTests`, which replays the regression corpus in
// `swift test`. Each input becomes one file of a fresh log directory — a segment (active or
// sealed), a consumer offset file or META — which is then opened, read, verified and consumed
// through the public API. Every input must end in records or a typed `SpoolError`: never a crash,
// a hang or an allocation past the format's bounds.

/// How the first byte of an input places the rest in the log directory.
public enum FuzzMode: UInt8, CaseIterable, Sendable {
    /// The rest is the active segment.
    case activeSegment
    /// The rest is a sealed segment; an empty active segment follows it.
    case sealedSegment
    /// A valid segment header, then the rest as blocks whose checksums are fixed up, so inputs
    /// reach the record decoder and zstd instead of stopping at a checksum.
    case checkedBlocks
    /// The rest is `consumers/f.offset`, next to a small valid log.
    case offsetFile
    /// The rest is META, next to a small valid log.
    case meta
}

/// How one input ended.
public enum FuzzOutcome: Equatable, Sendable, CustomStringConvertible {
    case empty
    /// Opened and read: records and notices seen by a reader.
    case read(records: Int, notices: Int)
    /// Refused with a typed error.
    case refused(SpoolError.Code)
    /// Anything else thrown: a defect (the readers promise typed errors).
    case failed(String)

    public var description: String {
        switch self {
        case .empty: "empty input"
        case .read(let records, let notices): "\(records) records, \(notices) notices"
        case .refused(let code): "\(code)"
        case .failed(let error): "untyped error: \(error)"
        }
    }
}

/// Places `input` in a fresh log directory at `directory` (see ``FuzzMode``) and reads it every
/// way a log is read: open, a reader to the end, verify, a consumer's read and commit.
public func runFuzzInput(_ input: [UInt8], directory: String) -> FuzzOutcome {
    guard let first = input.first else { return .empty }
    let mode = FuzzMode(rawValue: first % UInt8(FuzzMode.allCases.count))!
    let rest = Array(input.dropFirst())
    try? FileManager.default.removeItem(atPath: directory)
    try? FileManager.default.createDirectory(atPath: directory + "/consumers", withIntermediateDirectories: true)
    let segment0 = directory + "/00000000000000000000.seg"
    switch mode {
    case .activeSegment:
        write(segment0, rest)
    case .sealedSegment:
        write(segment0, rest)
        write(directory + "/00000000000000000100.seg", segmentHeader(base: 100))
    case .checkedBlocks:
        write(segment0, segmentHeader(base: 0) + fixingChecksums(rest))
    case .offsetFile, .meta:
        // A one-block log: records "A" and "B", uncompressed.
        write(segment0, segmentHeader(base: 0) + fixingChecksums(Array("SPBK".utf8) + [0, 0, 0, 0] + [UInt8](repeating: 0, count: 8)
            + [2, 0, 0, 0, 6, 0, 0, 0, 6, 0, 0, 0] + [UInt8](repeating: 0, count: 12) + [1, 0, 65, 1, 0, 66]))
        write(directory + (mode == .meta ? "/META" : "/consumers/f.offset"), rest)
    }
    do {
        return try withEventLog(directory: directory) { log in
            var records = 0
            var notices = 0
            let reader = log.reader()
            while let item = try reader.next() {
                if case .record = item { records += 1 } else { notices += 1 }
            }
            _ = try log.verify()
            let consumer = try log.consumer(named: "f")
            let batch = try consumer.read(maxCount: 10)
            if let last = batch.records.last { try consumer.commit(upTo: last.seq + 1) }
            return .read(records: records, notices: notices)
        }
    } catch let error as SpoolError {
        return .refused(error.code)
    } catch {
        return .failed("\(error)")
    }
}

/// A valid 64-byte segment header (log id all zeros).
public func segmentHeader(base: UInt64) -> [UInt8] {
    var header = Array("SPOOLSEG".utf8) + [2, 0, 64, 0, 0, 0, 0, 0]
    header += (0..<8).map { UInt8(truncatingIfNeeded: base >> (8 * UInt64($0))) }
    header += [UInt8](repeating: 0, count: 36)  // created ms, log id, reserved
    return header + littleEndian(crc32c(header))
}

/// Walks `bytes` as back-to-back blocks, full (40-byte header) or compact (18-byte header,
/// magic byte 0xC5), and rewrites each one's payload CRC and header check.
public func fixingChecksums(_ bytes: [UInt8]) -> [UInt8] {
    var out = bytes
    var offset = 0
    while offset + 18 <= out.count {
        if out[offset] == 0xC5 {
            let end = min(out.count, offset + 18 + (Int(out[offset + 8]) | Int(out[offset + 9]) << 8))
            out.replaceSubrange(offset + 12..<offset + 16, with: littleEndian(crc32c(Array(out[offset + 18..<end]))))
            out.replaceSubrange(offset + 16..<offset + 18, with: littleEndian(crc32c(Array(out[offset..<offset + 16]))).prefix(2))
            offset = end
            continue
        }
        guard offset + 40 <= out.count else { break }
        let stored = Int(out[offset + 20]) | Int(out[offset + 21]) << 8 | Int(out[offset + 22]) << 16 | Int(out[offset + 23]) << 24
        let end = min(out.count, offset + 40 + stored)
        out.replaceSubrange(offset + 32..<offset + 36, with: littleEndian(crc32c(Array(out[offset + 40..<end]))))
        out.replaceSubrange(offset + 36..<offset + 40, with: littleEndian(crc32c(Array(out[offset..<offset + 36]))))
        offset = end
    }
    return out
}

/// CRC-32C (Castagnoli) by ISA-L, as Spool computes it (`~crc32_iscsi(data, ~0)`).
func crc32c(_ bytes: [UInt8]) -> UInt32 {
    var bytes = bytes
    guard !bytes.isEmpty else { return 0 }
    return ~bytes.withUnsafeMutableBufferPointer { crc32_iscsi($0.baseAddress, Int32($0.count), ~0) }
}

func littleEndian(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * UInt32($0))) } }

func write(_ path: String, _ bytes: [UInt8]) { _ = FileManager.default.createFile(atPath: path, contents: Data(bytes)) }

