import CZstd

/// A reusable zstd compression context. Not thread-safe: one owner (the writer thread).
final class ZstdCompressor {
    private let context: OpaquePointer
    let level: Int32

    init(level: Int32) {
        guard let context = ZSTD_createCCtx() else { fatalError("ZSTD_createCCtx failed: out of memory") }
        self.context = context
        self.level = level
    }

    deinit { ZSTD_freeCCtx(context) }

    /// The most bytes compressing `count` bytes can produce.
    static func bound(_ count: Int) -> Int { ZSTD_compressBound(count) }

    /// Compresses `source` into `destination` (which must hold `bound(source.count)` bytes)
    /// as one zstd frame and returns the compressed size.
    func compress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) throws -> Int {
        let result = ZSTD_compressCCtx(context, destination.baseAddress, destination.count,
                                       source.baseAddress, source.count, level)
        if ZSTD_isError(result) != 0 {
            throw SpoolError(.io, "zstd compression failed: \(String(cString: ZSTD_getErrorName(result)))")
        }
        return result
    }
}

/// A reusable zstd decompression context. Not thread-safe: one owner (a reader).
final class ZstdDecompressor {
    private let context: OpaquePointer

    init() {
        guard let context = ZSTD_createDCtx() else { fatalError("ZSTD_createDCtx failed: out of memory") }
        self.context = context
    }

    deinit { ZSTD_freeDCtx(context) }

    /// Decompresses one frame into exactly `destination.count` bytes; returns false when the
    /// frame is invalid or does not decode to exactly that many bytes.
    func decompress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) -> Bool {
        let declared = ZSTD_getFrameContentSize(source.baseAddress, source.count)
        // ZSTD_CONTENTSIZE_UNKNOWN / _ERROR are the two largest UInt64 values.
        guard declared == UInt64(destination.count) else { return false }
        let result = ZSTD_decompressDCtx(context, destination.baseAddress, destination.count,
                                         source.baseAddress, source.count)
        return ZSTD_isError(result) == 0 && result == destination.count
    }
}
