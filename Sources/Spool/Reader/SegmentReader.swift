/// Reads the blocks of one segment file, validating everything before it is trusted.
///
/// Lengths come from headers whose checksum passed and are bounded by the format's maxima
/// and by `limit` (the bytes of the file known to be valid), so no file content can make it
/// allocate without bound, loop or hang. Not thread-safe: one reader owns it.
final class SegmentReader {
    let file: FileIO
    let baseSeq: UInt64
    /// Offset past the last byte this reader may look at.
    var limit: Int64
    /// The payload of the last block read (stored form, checksum verified).
    private(set) var payload: [UInt8] = []
    private var headerBuffer = [UInt8](repeating: 0, count: Format.blockHeaderSize)

    init(path: String, baseSeq: UInt64, limit: Int64) throws {
        file = try FileIO.open(path, .readOnly)
        self.baseSeq = baseSeq
        self.limit = limit
    }

    deinit { file.close() }

    /// What is at an offset of the segment.
    enum BlockRead {
        /// A valid block: its header, with its payload in `payload` (checksum verified).
        case valid(BlockHeader)
        /// Fewer bytes remain before `limit` than a header, or than the header says the block takes.
        case truncated
        /// The bytes there are not a valid block (bad magic, header or payload checksum, bounds).
        case corrupt(String)
    }

    /// Validates the 64-byte segment header against the file name and `logID`.
    func checkHeader(logID: LogID?) throws -> String? {
        guard limit >= Int64(Format.segmentHeaderSize) else { return "the file is shorter than a segment header" }
        let bytes = try file.read(count: Format.segmentHeaderSize, at: 0)
        let parsed = bytes.withUnsafeBytes { SegmentHeader.parse($0) }
        switch parsed {
        case .failure(.unsupportedVersion(let version)):
            throw SpoolError(.unsupportedVersion, "segment format version \(version) is newer than this reader's (\(Format.segmentVersion))", path: file.path)
        case .failure(let invalid):
            return "invalid segment header (\(invalid))"
        case .success(let header):
            if header.baseSeq != baseSeq { return "the header's base seq \(header.baseSeq) does not match the file name" }
            if let logID, header.logID != logID { return "the segment belongs to another log (\(header.logID))" }
            return nil
        }
    }

    /// Reads and verifies the block at `offset`.
    func readBlock(at offset: Int64) throws -> BlockRead {
        guard offset + Int64(Format.blockHeaderSize) <= limit else { return .truncated }
        let n = try headerBuffer.withUnsafeMutableBytes { try file.read(into: $0, at: offset) }
        guard n == Format.blockHeaderSize else { return .truncated }
        let parsed = headerBuffer.withUnsafeBytes { BlockHeader.parse($0) }
        guard case .success(let header) = parsed else {
            if case .failure(let invalid) = parsed { return .corrupt("block header at offset \(offset): \(invalid)") }
            return .corrupt("block header at offset \(offset)")
        }
        let payloadOffset = offset + Int64(Format.blockHeaderSize)
        guard payloadOffset + Int64(header.storedLength) <= limit else { return .truncated }
        let length = Int(header.storedLength)
        if payload.count != length {
            if payload.capacity >= length {
                payload.removeAll(keepingCapacity: true)
                payload.append(contentsOf: repeatElement(0, count: length))
            } else {
                payload = [UInt8](repeating: 0, count: length)
            }
        }
        let read = try payload.withUnsafeMutableBytes { try file.read(into: $0, at: payloadOffset) }
        guard read == length else { return .truncated }
        let crc = CRC32C.checksum(payload)
        guard crc == header.payloadCRC else {
            return .corrupt("block at offset \(offset): payload checksum mismatch")
        }
        return .valid(header)
    }

    /// Finds the next valid block strictly after `offset`, scanning for the block magic.
    /// Reads the rest of the segment at most once in 1 MiB chunks: bounded by `limit`.
    func resync(after offset: Int64) throws -> (offset: Int64, header: BlockHeader)? {
        let chunkSize = 1 << 20
        var start = offset + 1
        var chunk = [UInt8](repeating: 0, count: chunkSize + Format.blockMagic.count)
        while start + Int64(Format.blockHeaderSize) <= limit {
            let want = Int(min(Int64(chunk.count), limit - start))
            let n = try chunk.withUnsafeMutableBytes { try file.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<want]), at: start) }
            guard n >= Format.blockMagic.count else { return nil }
            var i = 0
            while i + Format.blockMagic.count <= n {
                if chunk[i] == Format.blockMagic[0] && chunk[i + 1] == Format.blockMagic[1]
                    && chunk[i + 2] == Format.blockMagic[2] && chunk[i + 3] == Format.blockMagic[3] {
                    let candidate = start + Int64(i)
                    if case .valid(let header) = try readBlock(at: candidate) {
                        return (candidate, header)
                    }
                }
                i += 1
            }
            // Step so that a magic straddling the chunk boundary is still seen.
            start += Int64(max(1, n - Format.blockMagic.count + 1))
        }
        return nil
    }
}
