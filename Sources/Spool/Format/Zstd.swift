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

    /// The dictionary the context references for `ZSTD_compress2` (kept alive while referenced).
    private var referenced: ZstdDictionary?

    /// Points the context's sticky parameters at `dictionary`: no dictionary id, no checksum,
    /// the content size in the frame header. Done once per dictionary, not per block.
    private func reference(_ dictionary: ZstdDictionary) throws {
        ZSTD_CCtx_reset(context, ZSTD_reset_session_and_parameters)
        for (parameter, value) in [(ZSTD_c_dictIDFlag, Int32(0)), (ZSTD_c_checksumFlag, 0), (ZSTD_c_contentSizeFlag, 1)] {
            let result = ZSTD_CCtx_setParameter(context, parameter, value)
            if ZSTD_isError(result) != 0 { throw SpoolError(.io, "zstd: \(String(cString: ZSTD_getErrorName(result)))") }
        }
        let result = ZSTD_CCtx_refCDict(context, dictionary.compression)
        if ZSTD_isError(result) != 0 { throw SpoolError(.io, "zstd: \(String(cString: ZSTD_getErrorName(result)))") }
        referenced = dictionary
    }

    /// The most bytes compressing `count` bytes can produce.
    static func bound(_ count: Int) -> Int { ZSTD_compressBound(count) }

    /// Compresses `source` into `destination` (which must hold `bound(source.count)` bytes)
    /// as one zstd frame and returns the compressed size. With a dictionary, the frame is made
    /// with its digested form (the level is the dictionary's) and names no dictionary id: the
    /// block header does (FORMAT.md §3).
    func compress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer,
                  dictionary: ZstdDictionary? = nil) throws -> Int {
        let result: Int
        if let dictionary {
            if referenced !== dictionary { try reference(dictionary) }
            result = ZSTD_compress2(context, destination.baseAddress, destination.count, source.baseAddress, source.count)
        } else {
            result = ZSTD_compressCCtx(context, destination.baseAddress, destination.count,
                                       source.baseAddress, source.count, level)
        }
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
    func decompress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer,
                    dictionary: ZstdDictionary? = nil) -> Bool {
        let declared = ZSTD_getFrameContentSize(source.baseAddress, source.count)
        // ZSTD_CONTENTSIZE_UNKNOWN / _ERROR are the two largest UInt64 values.
        guard declared == UInt64(destination.count) else { return false }
        let result = if let dictionary {
            ZSTD_decompress_usingDDict(context, destination.baseAddress, destination.count,
                                       source.baseAddress, source.count, dictionary.decompression)
        } else {
            ZSTD_decompressDCtx(context, destination.baseAddress, destination.count,
                                source.baseAddress, source.count)
        }
        return ZSTD_isError(result) == 0 && result == destination.count
    }
}
