import CISAL
import Foundation
import Spool

// A fuzz target for Spool's readers. Each input becomes one file of a fresh log directory — a
// segment (active or sealed), a consumer offset file or META — which is then opened, read,
// verified and consumed through the public API. Every input must end in records or a typed
// `SpoolError`: never a crash, a hang or an allocation past the format's bounds.
//
// With libFuzzer (README, "Crash testing"): built with `-sanitize=fuzzer,address` and
// `-D SPOOL_LIBFUZZER`, libFuzzer calls `LLVMFuzzerTestOneInput`. Without it (a plain
// `swift build`), `SpoolFuzz FILE|DIR…` replays inputs, e.g. the regression corpus in
// Tests/SpoolTests/FuzzCorpus, and prints how each ended.

/// How the first byte of an input places the rest in the log directory.
enum FuzzMode: UInt8, CaseIterable {
    /// The rest is the active segment.
    case activeSegment
    /// The rest is a sealed segment; an empty active segment follows it.
    case sealedSegment
    /// A valid segment header, then the rest as blocks whose two CRCs are fixed up, so inputs
    /// reach the record decoder and zstd instead of stopping at a checksum.
    case checkedBlocks
    /// The rest is `consumers/f.offset`, next to a small valid log.
    case offsetFile
    /// The rest is META, next to a small valid log.
    case meta
}

/// Runs one input; returns how it ended, for the replay mode.
@discardableResult
func fuzzOne(_ input: [UInt8], directory: String) -> String {
    guard let first = input.first else { return "empty input" }
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
            if let last = batch.records.last { try consumer.commit(through: last.seq) }
            return "\(mode): \(records) records, \(notices) notices"
        }
    } catch let error as SpoolError {
        return "\(mode): \(error.code)"
    } catch {
        return "\(mode): \(error)"
    }
}

/// A valid 64-byte segment header (log id all zeros).
func segmentHeader(base: UInt64) -> [UInt8] {
    var header = Array("SPOOLSEG".utf8) + [2, 0, 64, 0, 0, 0, 0, 0]
    header += (0..<8).map { UInt8(truncatingIfNeeded: base >> (8 * UInt64($0))) }
    header += [UInt8](repeating: 0, count: 36)  // created ms, log id, reserved
    return header + littleEndian(crc32c(header))
}

/// Walks `bytes` as back-to-back blocks, full (40-byte header) or compact (18-byte header,
/// magic byte 0xC5), and rewrites each one's payload CRC and header check.
func fixingChecksums(_ bytes: [UInt8]) -> [UInt8] {
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

/// The scratch directory of this process.
let scratch = NSTemporaryDirectory() + "spool-fuzz-\(getpid())"

@_cdecl("LLVMFuzzerTestOneInput")
public func spoolFuzzTestOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    fuzzOne(Array(UnsafeBufferPointer(start: data, count: size)), directory: scratch)
    return 0
}

#if SPOOL_LIBFUZZER
/// libFuzzer's entry point, called from this target's `main` (SwiftPM links executables
/// with their module's own `main`, so libFuzzer's is not used).
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt
) -> CInt
#endif

@main
enum SpoolFuzzMain {
    static func main() {
        #if SPOOL_LIBFUZZER
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in spoolFuzzTestOneInput(data, size) })
        #else
        replay(CommandLine.arguments.dropFirst())
        #endif
    }

    /// Replays every file given, and every file in every directory given.
    static func replay(_ arguments: ArraySlice<String>) {
        var files = [String]()
        for argument in arguments {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: argument, isDirectory: &isDirectory) else { continue }
            if isDirectory.boolValue {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: argument)) ?? []
                files += names.sorted().map { argument + "/" + $0 }
            } else {
                files.append(argument)
            }
        }
        if files.isEmpty {
            print("usage: SpoolFuzz FILE|DIR…  (replays fuzz inputs through Spool's readers)")
            return
        }
        for file in files {
            let input = Array(FileManager.default.contents(atPath: file) ?? Data())
            print("\((file as NSString).lastPathComponent): \(fuzzOne(input, directory: scratch))")
        }
        try? FileManager.default.removeItem(atPath: scratch)
    }
}
