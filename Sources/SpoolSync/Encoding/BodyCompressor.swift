import CZlib
import CZstd

/// Compresses request bodies: gzip through zlib (`deflateInit2` with `16 + MAX_WBITS`, which
/// writes the gzip header and trailer) or zstd (one frame with its content size).
///
/// Compression of a body in memory cannot fail for a valid level; should the library report
/// an error anyway the body is sent uncompressed (`contentEncoding` is then `nil`), which every
/// server accepts.
public struct BodyCompressor: Sendable {
    /// The algorithm.
    public let compression: HTTPSink.Compression
    /// The level (zlib 1 ... 9, zstd -7 ... 22).
    public let level: Int32

    /// A compressor with this algorithm and level (1, the fastest, by default).
    public init(compression: HTTPSink.Compression, level: Int32 = 1) {
        self.compression = compression
        self.level = level
    }

    /// The compressed body and its `Content-Encoding` (`nil` when sent as it is).
    public func compress(_ body: [UInt8]) -> (body: [UInt8], contentEncoding: String?) {
        switch compression {
        case .none: return (body, nil)
        case .gzip: return Self.gzip(body, level: level).map { ($0, "gzip") } ?? (body, nil)
        case .zstd: return Self.zstd(body, level: level).map { ($0, "zstd") } ?? (body, nil)
        }
    }

    static func gzip(_ input: [UInt8], level: Int32) -> [UInt8]? {
        var stream = z_stream()
        let initialised = deflateInit2_(
            &stream, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY,
            zlibVersion(), Int32(MemoryLayout<z_stream>.size))
        guard initialised == Z_OK else { return nil }
        defer { deflateEnd(&stream) }
        let bound = Int(deflateBound(&stream, UInt(input.count)))
        var status = Z_OK
        let output = [UInt8](unsafeUninitializedCapacity: bound) { destination, count in
            input.withUnsafeBufferPointer { source in
                stream.next_in = UnsafeMutablePointer(mutating: source.baseAddress)
                stream.avail_in = UInt32(source.count)
                stream.next_out = destination.baseAddress
                stream.avail_out = UInt32(destination.count)
                status = deflate(&stream, Z_FINISH)
            }
            count = status == Z_STREAM_END ? Int(stream.total_out) : 0
        }
        return status == Z_STREAM_END ? output : nil
    }

    static func zstd(_ input: [UInt8], level: Int32) -> [UInt8]? {
        let bound = ZSTD_compressBound(input.count)
        var failed = false
        let output = [UInt8](unsafeUninitializedCapacity: bound) { destination, count in
            let written = input.withUnsafeBytes { source in
                ZSTD_compress(destination.baseAddress, destination.count, source.baseAddress, source.count, level)
            }
            failed = ZSTD_isError(written) != 0
            count = failed ? 0 : written
        }
        return failed ? nil : output
    }
}
