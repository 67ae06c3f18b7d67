import Foundation
import Testing
@testable import Spool

/// A fresh directory under the system's temporary directory, removed by `cleanup()`.
struct TemporaryDirectory {
    let path: String

    init(_ name: String = #function) {
        let safe = name.filter { $0.isLetter || $0.isNumber }
        path = NSTemporaryDirectory() + "spool-tests/\(safe)-\(UUID().uuidString.prefix(8))"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func cleanup() { try? FileManager.default.removeItem(atPath: path) }

    /// A fresh directory whose syncs the file layer tracks, for a simulated power cut
    /// (``cutPower(closing:in:)``); clean it up with ``cleanupFaults()``.
    static func trackingSyncs(_ name: String = #function) -> TemporaryDirectory {
        let dir = TemporaryDirectory(name)
        FaultInjection.trackSyncs(under: dir.path)
        return dir
    }

    /// Disarms every fault armed under the directory and stops tracking its syncs, then
    /// removes it: the `defer` of a fault-injection test.
    func cleanupFaults() {
        FaultInjection.disarm(under: path)
        FaultInjection.stopTracking(under: path)
        cleanup()
    }

    /// The path of a file inside the directory.
    func file(_ name: String) -> String { path + "/" + name }

    /// Segment file names, sorted.
    func segments() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).filter { $0.hasSuffix(".seg") }.sorted()
    }
}

/// 4 KiB blocks in 64 KiB segments, written at once (no linger): a few hundred ~1 KiB
/// records fill several segments.
func rollingConfiguration() -> Configuration {
    var configuration = smallConfiguration(blockSize: 4096)
    configuration.linger = .zero
    return configuration
}

/// Appends `count` noisy 900-byte records (`noisyPayload(seq, size: 900)` for a new log) across
/// segments, syncs them, and returns the segment files' names.
func appendAcrossSegments(_ log: EventLog, in dir: TemporaryDirectory, count: Int) throws -> [String] {
    for i in 0..<count { try log.append(noisyPayload(i, size: 900)) }
    try log.syncBlocking()
    return dir.segments()
}

/// A small configuration that rolls segments quickly.
func smallConfiguration(blockSize: Int = 1024, segmentSize: Int = 64 * 1024) -> Configuration {
    var configuration = Configuration()
    configuration.blockSize = blockSize
    configuration.segmentSize = segmentSize
    configuration.linger = .milliseconds(1)
    return configuration
}

/// Deterministic payloads: record i of a test is `payload(i)`.
func payload(_ i: Int, size: Int? = nil) -> [UInt8] {
    let text = "{\"event\":\"screen_view\",\"n\":\(i),\"screen\":\"home-\(i % 7)\",\"pad\":\"" + String(repeating: "x", count: (size ?? (i % 50))) + "\"}"
    return Array(text.utf8)
}

/// The records (not notices) of a read.
func records(_ items: [ReadItem]) -> [Record] {
    items.compactMap { if case .record(let r) = $0 { return r } else { return nil } }
}

/// The notices (not records) of a read.
func notices(_ items: [ReadItem]) -> [ReadNotice] {
    items.compactMap { if case .notice(let n) = $0 { return n } else { return nil } }
}

/// Reads a whole file.
func readFile(_ path: String) -> [UInt8] { Array(FileManager.default.contents(atPath: path) ?? Data()) }

/// Overwrites a whole file.
/// Copies a file, or a directory tree (a live log's directory included), byte by byte.
func copyItem(_ source: String, to destination: String) {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: source, isDirectory: &isDirectory) else { return }
    if isDirectory.boolValue {
        try? FileManager.default.createDirectory(atPath: destination, withIntermediateDirectories: true)
        for name in (try? FileManager.default.contentsOfDirectory(atPath: source)) ?? [] {
            copyItem(source + "/" + name, to: destination + "/" + name)
        }
    } else {
        writeFile(destination, readFile(source))
    }
}

func writeFile(_ path: String, _ bytes: [UInt8]) { _ = FileManager.default.createFile(atPath: path, contents: Data(bytes)) }

/// Seeded randomness for tests: every random test reproduces from its seed.
typealias SeededGenerator = SplitMix64

/// A deterministic payload that compresses poorly (random hex digits), so segments fill.
func noisyPayload(_ i: Int, size: Int) -> [UInt8] {
    var generator = SeededGenerator(seed: UInt64(i) &* 7919 &+ 1)
    let digits = Array("0123456789abcdef".utf8)
    return Array("\(i):".utf8) + (0..<size).map { _ in digits[Int(generator.next() & 15)] }
}

/// Writes a log of 10 synced records (`payload(0..<10)`) whose consumer "c" has the offset
/// file a fast commit through 14 would have left, as if a power loss took back the data past 9.
func writeLogWithOffsetPastItsRecords(_ dir: TemporaryDirectory) throws {
    let log = try EventLog.open(directory: dir.path)
    for i in 0..<10 { try log.appendBlocking(payload(i), durability: .synced) }
    try log.consumer(named: "c").commit(upTo: 4)
    try log.close()
    let consumers = dir.file(Format.consumersDirectory)
    try OffsetFile.create(consumers + "/c" + Format.offsetSuffix, directory: consumers, nextSeq: 15, permissions: 0o600)
}

/// Writes `blocks` blocks of `perBlock` records (`payload(n)`) into a new log, each block
/// acknowledged at `written` before the next, then synced, and returns the first segment's bytes with each
/// block's end offset and end seq. The linger is made long, so a block is sealed only by the
/// wait: block boundaries do not depend on how fast the machine is.
func writeAcknowledgedBlocks(_ dir: TemporaryDirectory, configuration: Configuration, blocks: Int, perBlock: Int) throws
    -> (bytes: [UInt8], ends: [(offset: Int, endSeq: UInt64)]) {
    var configuration = configuration
    configuration.linger = .seconds(60)
    let log = try EventLog.open(directory: dir.path, configuration: configuration)
    var ends = [(Int, UInt64)]()
    var n = 0
    for _ in 0..<blocks {
        var last: UInt64 = 0
        for _ in 0..<perBlock {
            last = try log.append(payload(n))
            n += 1
        }
        try log.waitUntilBlocking(before: last + 1, is: .written)
        ends.append((Int(log.lock.withLock { log.state.table.segments.last!.size }), last + 1))
    }
    // Synced: damage to them is corruption, not a power cut's torn tail (FORMAT.md §6).
    try log.syncBlocking()
    try log.close()
    return (readFile(dir.file(Format.segmentName(0))), ends)
}

/// A golden file read the way FORMAT.md gives it, independently of the library's own decoding:
/// little-endian integers at offsets, and a cursor over LEB128 varints and zigzag deltas.
struct GoldenBytes {
    let bytes: [UInt8]
    /// Where ``varint()`` reads next.
    var cursor = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func u16(_ o: Int) -> UInt16 { UInt16(bytes[o]) | UInt16(bytes[o + 1]) << 8 }
    func u32(_ o: Int) -> UInt32 { (0..<4).reduce(0) { $0 | UInt32(bytes[o + $1]) << (8 * $1) } }
    func u64(_ o: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(bytes[o + $1]) << (8 * $1) } }

    /// The unsigned LEB128 varint at the cursor.
    mutating func varint() -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b = bytes[cursor]
            cursor += 1
            value |= UInt64(b & 0x7F) << shift
            if b < 0x80 { return value }
            shift += 7
        }
    }

    /// The zigzag-encoded signed varint at the cursor.
    mutating func zigzagVarint() -> Int64 {
        let z = varint()
        return Int64(bitPattern: z >> 1) ^ -Int64(bitPattern: z & 1)
    }

    /// `count` bytes at the cursor.
    mutating func take(_ count: Int) -> [UInt8] {
        defer { cursor += count }
        return Array(bytes[cursor..<cursor + count])
    }
}

/// Runs `body` on a thread of its own and returns how it ended; records an issue and returns
/// nil if it has not ended within `seconds` (a reader that spins, an open that blocks, never would).
func within<T: Sendable>(seconds: Double, _ body: @escaping @Sendable () throws -> T) -> Result<T, any Error>? {
    let done = DispatchSemaphore(value: 0)
    let box = ResultBox<T>()
    Thread.detachNewThread {
        box.set(Result { try body() })
        done.signal()
    }
    guard done.wait(timeout: .now() + seconds) == .success else {
        Issue.record("did not return within \(seconds) s")
        return nil
    }
    return box.get()
}

/// A result handed from a thread to the test.
final class ResultBox<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Result<T, any Error>?
    func set(_ value: Result<T, any Error>) { lock.withLock { self.value = value } }
    func get() -> Result<T, any Error>? { lock.withLock { value } }
}
