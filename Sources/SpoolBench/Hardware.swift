#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CZstd

/// What this machine can do without any log on top: the ceilings Spool is measured against.
package struct HardwareFigures: Sendable, Codable {
    /// `ZSTD_compress` level 1 over the events in 64 KiB chunks: input MB/s, and the ratio.
    package var zstdCompressMBps: Double
    package var zstdRatio: Double
    /// `ZSTD_decompress` of those chunks: output MB/s.
    package var zstdDecompressMBps: Double
    /// Sequential 1 MiB writes to a new file, then one `fdatasync`: MB/s.
    package var sequentialWriteMBps: Double
    /// 256-byte appends, each followed by `fdatasync`: calls per second and latencies.
    package var fdatasyncPerSecond: Double
    package var fdatasyncLatency: Latencies?
}

/// Measures ``HardwareFigures`` on `events`, writing files in `directory`.
func measureHardware(events: EventSet, directory: String, writeBytes: Int, syncBudget: Budget) throws -> HardwareFigures {
    let data = events.concatenated()
    let (compress, ratio, decompress) = zstdSpeed(data, chunk: 64 * 1024, level: 1)
    let sequential = try sequentialWrite(data, total: writeBytes, path: directory + "/sequential.bin")
    let sync = try fdatasyncRate(path: directory + "/fdatasync.bin", budget: syncBudget)
    return HardwareFigures(
        zstdCompressMBps: compress, zstdRatio: ratio, zstdDecompressMBps: decompress,
        sequentialWriteMBps: sequential, fdatasyncPerSecond: sync.rate, fdatasyncLatency: sync.latencies
    )
}

/// Raw zstd speed: compresses `data` in `chunk`-byte pieces with one reused context (the
/// best case for any block format), repeating until at least 0.5 s has passed, then
/// decompresses the pieces the same way. Returns input MB/s, ratio, output MB/s.
func zstdSpeed(_ data: [UInt8], chunk: Int, level: Int32) -> (compressMBps: Double, ratio: Double, decompressMBps: Double) {
    var compressed = [[UInt8]]()
    var compressedBytes = 0
    var passes = [compressChunks(data, chunk: chunk, level: level) { block in
        compressed.append(Array(block))
        compressedBytes += block.count
    }]
    while passes.reduce(0, { $0 + $1.nanos }) < 500_000_000 {
        passes.append(compressChunks(data, chunk: chunk, level: level) { _ in })
    }
    let compressSeconds = Double(passes.reduce(0) { $0 + $1.nanos }) / 1e9

    let dctx = ZSTD_createDCtx()!
    defer { ZSTD_freeDCtx(dctx) }
    var plain = [UInt8](repeating: 0, count: chunk)
    var decoded = 0
    let start = monotonicNanos()
    repeat {
        for block in compressed {
            let size = block.withUnsafeBytes { src in
                plain.withUnsafeMutableBytes { dst in
                    ZSTD_decompressDCtx(dctx, dst.baseAddress, chunk, src.baseAddress, src.count)
                }
            }
            precondition(ZSTD_isError(size) == 0, "ZSTD_decompressDCtx failed")
            decoded += size
        }
    } while monotonicNanos() - start < 500_000_000
    let decompressSeconds = Double(monotonicNanos() - start) / 1e9
    return (
        Double(data.count * passes.count) / compressSeconds / 1e6,
        Double(data.count) / Double(max(compressedBytes, 1)),
        Double(decoded) / decompressSeconds / 1e6
    )
}

/// Raw zstd compression alone, once over `data`, as a run counting input bytes (for MB/s).
func zstdCompressRun(_ data: [UInt8], chunk: Int, level: Int32) -> Run {
    compressChunks(data, chunk: chunk, level: level) { _ in }
}

/// Compresses `data` in `chunk`-byte pieces with one context, handing each compressed
/// piece to `body`, and times the whole (`body` included: keep it cheap).
func compressChunks(_ data: [UInt8], chunk: Int, level: Int32, _ body: (UnsafeRawBufferPointer) -> Void) -> Run {
    let cctx = ZSTD_createCCtx()!
    defer { ZSTD_freeCCtx(cctx) }
    let bound = ZSTD_compressBound(chunk)
    var output = [UInt8](repeating: 0, count: bound)
    let start = monotonicNanos()
    data.withUnsafeBytes { src in
        var offset = 0
        while offset < src.count {
            let size = min(chunk, src.count - offset)
            output.withUnsafeMutableBytes { dst in
                let written = ZSTD_compressCCtx(cctx, dst.baseAddress, bound, src.baseAddress! + offset, size, level)
                precondition(ZSTD_isError(written) == 0, "ZSTD_compressCCtx failed")
                body(UnsafeRawBufferPointer(rebasing: dst[0..<written]))
            }
            offset += size
        }
    }
    return Run(count: data.count, nanos: monotonicNanos() - start)
}

/// Writes `total` bytes (cycling `data`) in 1 MiB writes to a new file at `path`, then
/// `fdatasync`s once. Returns MB/s over the whole, sync included. Removes the file.
func sequentialWrite(_ data: [UInt8], total: Int, path: String) throws -> Double {
    let fd = try openFile(path, flags: O_CREAT | O_TRUNC | O_WRONLY)
    defer { close(fd); unlink(path) }
    let piece = 1 << 20
    var buffer = [UInt8]()
    buffer.reserveCapacity(piece)
    while buffer.count < piece { buffer.append(contentsOf: data.prefix(piece - buffer.count)) }
    let start = monotonicNanos()
    var written = 0
    while written < total {
        try writeAll(fd, buffer, path: path)
        written += buffer.count
    }
    try check(fdatasync(fd), "fdatasync", path)
    return Double(written) / (Double(monotonicNanos() - start) / 1e9) / 1e6
}

/// Appends 256 bytes and `fdatasync`s, again and again within `budget`. Returns the rate
/// of append+sync pairs and their latencies. Removes the file.
///
/// With `preallocated`, the file first gets 16 MiB of zeros (written and synced, untimed) and
/// each record overwrites the next 256 bytes of them: the `fdatasync` then has no new file size
/// to commit, as for Spool's synced writes (FORMAT.md §6, preallocated space).
func fdatasyncRate(path: String, budget: Budget, preallocated: Bool = false) throws -> Run {
    let fd = try openFile(path, flags: O_CREAT | O_TRUNC | O_WRONLY | (preallocated ? 0 : O_APPEND))
    defer { close(fd); unlink(path) }
    let record = [UInt8](repeating: 0x61, count: 256)
    if preallocated {
        let zeros = [UInt8](repeating: 0, count: 1 << 20)
        for _ in 0..<16 { try writeAll(fd, zeros, path: path) }
        try check(fdatasync(fd), "fdatasync", path)
    }
    var offset: off_t = 0
    var nanos = [UInt64]()
    nanos.reserveCapacity(budget.events)
    let start = monotonicNanos()
    let deadline = budget.deadline(from: start)
    while nanos.count < budget.events {
        let t0 = monotonicNanos()
        if preallocated {
            guard pwrite(fd, record, record.count, offset) == record.count else { throw BenchError("pwrite \(path): \(String(cString: strerror(errno)))") }
            offset = (offset + off_t(record.count)) % (16 << 20)
        } else {
            try writeAll(fd, record, path: path)
        }
        try check(fdatasync(fd), "fdatasync", path)
        let t1 = monotonicNanos()
        nanos.append(t1 - t0)
        if t1 > deadline { break }
    }
    return Run(count: nanos.count, nanos: monotonicNanos() - start, latencies: Latencies(nanos: nanos))
}

/// A failed system call in a benchmark's own file handling.
package struct BenchError: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

func check(_ result: Int32, _ operation: String, _ path: String) throws {
    if result != 0 { throw BenchError("\(operation) \(path): \(String(cString: strerror(errno)))") }
}

func openFile(_ path: String, flags: Int32) throws -> Int32 {
    let fd = open(path, flags, 0o600)
    if fd < 0 { throw BenchError("open \(path): \(String(cString: strerror(errno)))") }
    return fd
}

func writeAll(_ fd: Int32, _ bytes: [UInt8], path: String) throws {
    try bytes.withUnsafeBytes { raw in
        var offset = 0
        while offset < raw.count {
            let n = write(fd, raw.baseAddress! + offset, raw.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                throw BenchError("write \(path): \(String(cString: strerror(errno)))")
            }
            offset += n
        }
    }
}
