import CZstd

/// A reusable zstd compression context. Not thread-safe: one owner (the writer thread).
///
/// Every frame is made with `ZSTD_compress2` and the context's sticky parameters: the level,
/// no checksum (the block's CRC-32C covers the payload), no dictionary id (the block header
/// names the dictionary), and the content size unless the caller leaves it out.
final class ZstdCompressor {
    private let context: OpaquePointer
    let level: Int32
    /// The dictionary the context references (kept alive while referenced); nil for none.
    private var referenced: ZstdDictionary?
    private var contentSize = true
    /// Polled between steps of ``interruptionStep`` input bytes, when set: raised, it stops the
    /// compression with ``Interrupted``. A cold rewrite's (a 1 MiB block at level 9 takes a
    /// thread at the lowest priority long enough that `close()` should not wait for all of it),
    /// raised by the log's state when the rewrite may not go on; the writer's compressor has
    /// none and compresses in one call.
    var interruption: StopFlag?
    /// Input bytes compressed between two looks at ``interruption``.
    static let interruptionStep = 32 * 1024
    /// What an ``interruption`` stopped.
    struct Interrupted: Error {}

    init(level: Int32) {
        guard let context = ZSTD_createCCtx() else { fatalError("ZSTD_createCCtx failed: out of memory") }
        self.context = context
        self.level = level
        for (parameter, value) in [(ZSTD_c_compressionLevel, level), (ZSTD_c_checksumFlag, 0), (ZSTD_c_dictIDFlag, 0), (ZSTD_c_contentSizeFlag, 1)] {
            let result = ZSTD_CCtx_setParameter(context, parameter, value)
            precondition(ZSTD_isError(result) == 0, "zstd refused parameter \(parameter.rawValue) = \(value)")
        }
    }

    deinit { ZSTD_freeCCtx(context) }

    /// The most bytes compressing `count` bytes can produce.
    static func bound(_ count: Int) -> Int { ZSTD_compressBound(count) }

    /// Compresses `source` into `destination` (which must hold `bound(source.count)` bytes)
    /// as one zstd frame and returns the compressed size. With a dictionary, the frame is made
    /// with its digested form (the level is the dictionary's) and names no dictionary id: the
    /// block header does (FORMAT.md §3). Without `contentSize`, the frame header leaves the
    /// content size out (the block header has it): a byte less for a compact block.
    func compress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer,
                  dictionary: ZstdDictionary? = nil, contentSize: Bool = true) throws -> Int {
        if referenced !== dictionary {
            // A nil dictionary returns the context to no-dictionary mode.
            try check(ZSTD_CCtx_refCDict(context, dictionary?.compression))
            referenced = dictionary
        }
        if self.contentSize != contentSize {
            try check(ZSTD_CCtx_setParameter(context, ZSTD_c_contentSizeFlag, contentSize ? 1 : 0))
            self.contentSize = contentSize
        }
        if let interruption { return try compressInSteps(source, into: destination, interruption) }
        let result = ZSTD_compress2(context, destination.baseAddress, destination.count, source.baseAddress, source.count)
        try check(result)
        return result
    }

    /// The same frame as one `ZSTD_compress2` call makes (the content size pledged, so a frame
    /// that declares it declares it), streamed ``interruptionStep`` bytes at a time.
    private func compressInSteps(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer,
                                 _ interruption: StopFlag) throws -> Int {
        try check(ZSTD_CCtx_reset(context, ZSTD_reset_session_only))
        try check(ZSTD_CCtx_setPledgedSrcSize(context, UInt64(source.count)))
        var input = ZSTD_inBuffer(src: source.baseAddress, size: 0, pos: 0)
        var output = ZSTD_outBuffer(dst: destination.baseAddress, size: destination.count, pos: 0)
        while true {
            if interruption.isRaised {
                _ = ZSTD_CCtx_reset(context, ZSTD_reset_session_only)
                throw Interrupted()
            }
            input.size = min(source.count, input.size + Self.interruptionStep)
            let last = input.size == source.count
            // The destination holds the bound, so every call takes all the input it is given;
            // the end is reached when the call says nothing is left to flush.
            let left = ZSTD_compressStream2(context, &output, &input, last ? ZSTD_e_end : ZSTD_e_continue)
            try check(left)
            if last && left == 0 { return output.pos }
            guard output.pos < output.size else { throw SpoolError(.io, "zstd compression overflowed its bound") }
        }
    }

    private func check(_ result: Int) throws {
        if ZSTD_isError(result) != 0 {
            throw SpoolError(.io, "zstd compression failed: \(String(cString: ZSTD_getErrorName(result)))")
        }
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
    /// frame is invalid or does not decode to exactly that many bytes. A frame that declares
    /// its content size must declare that many; one that does not (compact blocks' frames)
    /// is decoded into the buffer, which zstd never writes past.
    func decompress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer,
                    dictionary: ZstdDictionary? = nil) -> Bool {
        let declared = ZSTD_getFrameContentSize(source.baseAddress, source.count)
        // ZSTD_CONTENTSIZE_UNKNOWN is the largest UInt64 value, _ERROR the next.
        guard declared == UInt64(destination.count) || declared == UInt64.max else { return false }
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
