import Foundation
import CZlib
import CZstd

/// A request body's `Content-Encoding`.
enum ContentCoding: Sendable, Equatable {
    case identity, gzip, zstd

    /// Parses a `Content-Encoding` value; `nil` (no header) is identity, an unknown coding is `nil`.
    init?(header: String?) {
        switch header?.trimmingCharacters(in: .whitespaces).lowercased() {
        case nil, "", "identity": self = .identity
        case "gzip", "x-gzip": self = .gzip
        case "zstd": self = .zstd
        default: return nil
        }
    }
}

/// Why a body could not be decompressed.
enum DecompressionError: Error, Sendable, Equatable {
    /// The decompressed body would be larger than the limit.
    case tooLarge
    /// The compressed stream is corrupt or truncated.
    case malformed(String)
}

/// Decompresses request bodies with the system's zlib and zstd, never producing more than
/// a limit: output is streamed in chunks and decompression stops at `limit + 1` bytes, so a
/// compression bomb costs at most the limit in memory. Stateless and thread-safe.
enum BodyDecoder {
    /// The size of each output chunk.
    static let chunkSize = 64 * 1024
    /// zstd's `ZSTD_error_frameParameter_windowTooLarge` as a function result (`(size_t)-16`);
    /// zstd pins error values below 100 (zstd_errors.h), which the module does not import.
    static let windowTooLarge = -16

    /// The decompressed body, at most `limit` bytes.
    static func decode(_ body: [UInt8], coding: ContentCoding, limit: Int) throws(DecompressionError) -> [UInt8] {
        switch coding {
        case .identity:
            guard body.count <= limit else { throw .tooLarge }
            return body
        case .gzip: return try gunzip(body, limit: limit)
        case .zstd: return try unzstd(body, limit: limit)
        }
    }

    /// Inflates gzip (RFC 1952), including several concatenated members.
    static func gunzip(_ body: [UInt8], limit: Int) throws(DecompressionError) -> [UInt8] {
        var stream = z_stream()
        // 16 + MAX_WBITS: expect a gzip header and trailer, with the largest window.
        guard inflateInit2_(&stream, 16 + MAX_WBITS, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw .malformed("zlib could not start")
        }
        defer { inflateEnd(&stream) }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: chunkSize)
        let result: DecompressionError? = body.withUnsafeBufferPointer { input in
            stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress)
            stream.avail_in = UInt32(input.count)
            while true {
                let status = chunk.withUnsafeMutableBufferPointer { out in
                    stream.next_out = out.baseAddress
                    stream.avail_out = UInt32(out.count)
                    return inflate(&stream, Z_NO_FLUSH)
                }
                let produced = chunkSize - Int(stream.avail_out)
                guard output.count + produced <= limit else { return .tooLarge }
                output.append(contentsOf: chunk[0..<produced])
                switch status {
                case Z_STREAM_END:
                    guard stream.avail_in > 0 else { return nil }
                    guard inflateReset(&stream) == Z_OK else { return .malformed("zlib could not restart") }
                case Z_OK:
                    continue
                case Z_BUF_ERROR where stream.avail_in == 0:
                    return .malformed("the gzip stream is truncated")
                default:
                    return .malformed("the gzip stream is corrupt")
                }
            }
        }
        if let result { throw result }
        return output
    }

    /// Decompresses one or more zstd frames, refusing windows larger than the limit needs.
    static func unzstd(_ body: [UInt8], limit: Int) throws(DecompressionError) -> [UInt8] {
        guard let context = ZSTD_createDCtx() else { throw .malformed("zstd could not start") }
        defer { ZSTD_freeDCtx(context) }
        // A frame never needs a window larger than its output; bigger ones are refused rather
        // than allocated (the memory half of bomb-proofing).
        let windowLog = min(27, max(10, Int32((Int.bitWidth - (limit - 1).leadingZeroBitCount))))
        _ = ZSTD_DCtx_setParameter(context, ZSTD_d_windowLogMax, windowLog)
        // A first frame that declares more content than the limit is refused before any work.
        let declared = body.withUnsafeBytes { ZSTD_getFrameContentSize($0.baseAddress, $0.count) }
        if declared < UInt64.max - 1, declared > UInt64(limit) { throw .tooLarge }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: chunkSize)
        let result: DecompressionError? = body.withUnsafeBufferPointer { input in
            var inBuffer = ZSTD_inBuffer(src: input.baseAddress, size: input.count, pos: 0)
            while true {
                let consumedBefore = inBuffer.pos
                let (code, produced) = chunk.withUnsafeMutableBufferPointer { out in
                    var outBuffer = ZSTD_outBuffer(dst: out.baseAddress, size: out.count, pos: 0)
                    let code = ZSTD_decompressStream(context, &outBuffer, &inBuffer)
                    return (code, outBuffer.pos)
                }
                if code == Self.windowTooLarge { return .tooLarge }
                if ZSTD_isError(code) != 0 { return .malformed("the zstd stream is corrupt") }
                guard output.count + produced <= limit else { return .tooLarge }
                output.append(contentsOf: chunk[0..<produced])
                // 0: a frame is complete and flushed; done once no input is left.
                if code == 0 && inBuffer.pos == inBuffer.size { return nil }
                // No progress with the input all read: the stream stops mid-frame.
                if produced == 0 && inBuffer.pos == consumedBefore { return .malformed("the zstd stream is truncated") }
            }
        }
        if let result { throw result }
        return output
    }
}
