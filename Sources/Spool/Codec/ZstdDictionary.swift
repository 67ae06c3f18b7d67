import CZstd

/// A zstd dictionary digested once for compression (`ZSTD_CDict`) and decompression
/// (`ZSTD_DDict`), shared by the writer and every reader of a log.
///
/// Thread-safety: immutable after creation; zstd documents digested dictionaries as read-only
/// and usable by many contexts on many threads at once, hence `@unchecked Sendable`.
final class ZstdDictionary: @unchecked Sendable {
    /// The id blocks name it by (never 0).
    let id: UInt32
    /// The dictionary's bytes (a trained zstd dictionary, or raw content).
    let bytes: [UInt8]
    let compression: OpaquePointer
    let decompression: OpaquePointer

    /// Digests `bytes` for compression at `level` and for decompression.
    /// - Throws: `.invalidConfiguration` if zstd refuses the bytes as a dictionary.
    init(id: UInt32, bytes: [UInt8], level: Int32) throws {
        precondition(id != 0, "dictionary id 0 means no dictionary")
        let created = bytes.withUnsafeBytes { raw in
            (ZSTD_createCDict(raw.baseAddress, raw.count, level), ZSTD_createDDict(raw.baseAddress, raw.count))
        }
        guard let compression = created.0, let decompression = created.1 else {
            if let c = created.0 { ZSTD_freeCDict(c) }
            if let d = created.1 { ZSTD_freeDDict(d) }
            throw SpoolError(.invalidConfiguration, "zstd refused dictionary \(id) (\(bytes.count) bytes)")
        }
        self.id = id
        self.bytes = bytes
        self.compression = compression
        self.decompression = decompression
    }

    deinit {
        ZSTD_freeCDict(compression)
        ZSTD_freeDDict(decompression)
    }
}

/// Trains a zstd dictionary of at most `size` bytes from `samples` with `ZDICT_trainFromBuffer`.
/// Blocking and CPU-bound (tens to hundreds of milliseconds for megabytes of samples): run it on
/// a background thread, never on the append path.
/// - Returns: the dictionary, or nil when zstd cannot train one from these samples (too few, too uniform).
func trainZstdDictionary(size: Int, samples: [UInt8], sampleSizes: [Int]) -> [UInt8]? {
    guard !sampleSizes.isEmpty else { return nil }
    var dictionary = [UInt8](repeating: 0, count: size)
    let result = dictionary.withUnsafeMutableBytes { out in
        samples.withUnsafeBytes { source in
            sampleSizes.withUnsafeBufferPointer { sizes in
                ZDICT_trainFromBuffer(out.baseAddress, out.count, source.baseAddress, sizes.baseAddress, UInt32(sizes.count))
            }
        }
    }
    guard ZDICT_isError(result) == 0, result > 0 else { return nil }
    dictionary.removeLast(dictionary.count - result)
    return dictionary
}
