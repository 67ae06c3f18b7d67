import CZstd
import Testing
@testable import SpoolCollector

/// Decompression is exact, and stops at the limit whatever the stream claims.
@Suite struct BodyDecoderTests {
    /// 1 MiB of varied, compressible bytes (spans many output chunks).
    private let plain: [UInt8] = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: ($0 * 7) ^ ($0 >> 9)) }

    @Test(arguments: [ContentCoding.gzip, .zstd])
    func roundTripIsExactAtTheLimit(coding: ContentCoding) throws {
        let compressed = coding == .gzip ? gzip(plain) : zstd(plain)
        #expect(try BodyDecoder.decode(compressed, coding: coding, limit: plain.count) == plain)
        #expect(throws: DecompressionError.tooLarge) {
            try BodyDecoder.decode(compressed, coding: coding, limit: plain.count - 1)
        }
    }

    @Test func identityIsLimitedToo() throws {
        #expect(try BodyDecoder.decode([1, 2, 3], coding: .identity, limit: 3) == [1, 2, 3])
        #expect(throws: DecompressionError.tooLarge) { try BodyDecoder.decode([1, 2, 3], coding: .identity, limit: 2) }
    }

    @Test func zstdStreamWithoutContentSizeStopsAtTheLimit() throws {
        let compressed = zstdStreaming(plain, windowLog: 10)
        #expect(ZSTD_getFrameContentSize(compressed, compressed.count) == UInt64.max, "the size is unknown")
        #expect(try BodyDecoder.decode(compressed, coding: .zstd, limit: plain.count) == plain)
        #expect(throws: DecompressionError.tooLarge) {
            try BodyDecoder.decode(compressed, coding: .zstd, limit: 100_000)
        }
    }

    @Test func zstdWindowLargerThanTheLimitNeedsIsRefused() throws {
        let compressed = zstdStreaming(plain, windowLog: 24)
        #expect(throws: DecompressionError.tooLarge) {
            try BodyDecoder.decode(compressed, coding: .zstd, limit: 64 << 10)
        }
    }

    @Test(arguments: [ContentCoding.gzip, .zstd])
    func everyTruncationIsMalformedNotACrash(coding: ContentCoding) {
        let small = Array(plain[0..<5000])
        let compressed = coding == .gzip ? gzip(small) : zstd(small)
        for end in stride(from: 0, to: compressed.count, by: 7) {
            #expect(throws: DecompressionError.self) {
                try BodyDecoder.decode(Array(compressed[0..<end]), coding: coding, limit: 1 << 20)
            }
        }
    }

    @Test func contentCodingNames() {
        #expect(ContentCoding(header: nil) == .identity)
        #expect(ContentCoding(header: "identity") == .identity)
        #expect(ContentCoding(header: " GZIP ") == .gzip)
        #expect(ContentCoding(header: "zstd") == .zstd)
        #expect(ContentCoding(header: "br") == nil)
    }

    /// `bytes` as one zstd frame written by the streaming API, which records no content size.
    private func zstdStreaming(_ bytes: [UInt8], windowLog: Int32) -> [UInt8] {
        let context = ZSTD_createCCtx()
        defer { ZSTD_freeCCtx(context) }
        _ = ZSTD_CCtx_setParameter(context, ZSTD_c_windowLog, windowLog)
        _ = ZSTD_CCtx_setParameter(context, ZSTD_c_contentSizeFlag, 0)
        var output = [UInt8](repeating: 0, count: ZSTD_compressBound(bytes.count) + 1024)
        let written = output.withUnsafeMutableBytes { out in
            bytes.withUnsafeBytes { input in
                var inBuffer = ZSTD_inBuffer(src: input.baseAddress, size: input.count, pos: 0)
                var outBuffer = ZSTD_outBuffer(dst: out.baseAddress, size: out.count, pos: 0)
                while ZSTD_compressStream2(context, &outBuffer, &inBuffer, ZSTD_e_end) != 0 {}
                return outBuffer.pos
            }
        }
        return Array(output[0..<written])
    }
}
