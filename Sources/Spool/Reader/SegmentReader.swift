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
    var payload: ArraySlice<UInt8> { payloadBuffer[0..<payloadCount] }
    /// Holds ``payload`` in its first `payloadCount` bytes; it only grows, so a walk over blocks
    /// of varying sizes allocates once. Never resized with `append(contentsOf:
    /// repeatElement(0, count:))`: unspecialized, as in a debug build, that is a generic loop
    /// of about 14 ms per 64 KiB, which made every read in a debug build (an app run from Xcode,
    /// Spool's own tests) spend most of its time zero-filling.
    private var payloadBuffer: [UInt8] = []
    private var payloadCount = 0
    private var headerBuffer = [UInt8](repeating: 0, count: Format.blockHeaderSize)
    /// The segment header, once ``checkHeader(logID:)`` passed (compact blocks' first
    /// timestamps are relative to its created ms).
    private(set) var header: SegmentHeader?

    let path: String

    /// Read-ahead: headers and payloads are copied out of a window of the file, so a walk
    /// over a segment (recovery's scan of the active segment, a consumer's read, `verify`) makes
    /// one system call per window rather than two per block. It only ever holds bytes below
    /// `limit` as it was when it was filled: those are never rewritten (the log only appends,
    /// and recovery truncates before any reader of the segment exists).
    private var window: [UInt8] = []
    private var windowStart: Int64 = 0
    private var windowCount = 0
    /// The window's size: 64 KiB, allocated on the first read that needs it (small enough to
    /// come from the heap: a reader per consumer costs little memory).
    static let windowSize = 64 << 10

    init(path: String, baseSeq: UInt64, limit: Int64) throws {
        file = try FileIO.open(path, .readOnly)
        self.path = path
        self.baseSeq = baseSeq
        self.limit = limit
    }

    deinit { file.close() }

    /// The size of the file this reader opened, once it is sealed (a sealed file never changes:
    /// it is only ever replaced whole, under another inode). One `fstat`, then remembered.
    func sealedSize() throws -> Int64 {
        if let known = knownSealedSize { return known }
        let size = try file.size()
        knownSealedSize = size
        return size
    }
    private var knownSealedSize: Int64?

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
        case .failure(.unsupportedVersion(let version)) where version > Format.segmentVersion:
            throw SpoolError(.unsupportedVersion, "segment format version \(version) is newer than this reader's (\(Format.segmentVersion))", path: file.path)
        case .failure(.unsupportedVersion(let version)):
            throw SpoolError(.unsupportedVersion, "segment format version \(version) is not a version any writer makes (they are 1 to \(Format.segmentVersion))", path: file.path)
        case .failure(.unsupportedHeaderSize(let size)):
            throw SpoolError(.unsupportedVersion, "segment header size \(size) is not \(Format.segmentHeaderSize), the only size of versions 1 to \(Format.segmentVersion)", path: file.path)
        case .failure(let invalid):
            return "invalid segment header (\(invalid))"
        case .success(let header):
            if header.baseSeq != baseSeq { return "the header's base seq \(header.baseSeq) does not match the file name" }
            if let logID, header.logID != logID { return "the segment belongs to another log (\(header.logID))" }
            self.header = header
            return nil
        }
    }

    /// What the first record's timestamp delta of a block with `header` is from.
    func timestampBase(for block: BlockHeader) -> Int64 { block.form == .compact ? header?.createdMillis ?? 0 : 0 }

    /// Reads and parses the block header at `offset` (either form): nil when too few bytes
    /// remain before `limit` for the header its first bytes announce.
    /// Through the window unless `alone` (a walk over headers only, whose blocks' payloads
    /// the window would read for nothing).
    private func parseHeader(at offset: Int64, alone: Bool = false) throws -> Result<BlockHeader, BlockHeader.Invalid>? {
        let available = Int(min(Int64(Format.blockHeaderSize), limit - offset))
        guard available >= Format.compactBlockHeaderSize else { return nil }
        let n = try headerBuffer.withUnsafeMutableBytes {
            let buffer = UnsafeMutableRawBufferPointer(rebasing: $0[0..<available])
            return try alone ? file.read(into: buffer, at: offset) : read(into: buffer, at: offset)
        }
        guard n == available else { return nil }
        let compact = headerBuffer[0] == Format.compactBlockMagic
        guard compact || n == Format.blockHeaderSize else { return nil }
        return headerBuffer.withUnsafeBytes { BlockHeader.parse(UnsafeRawBufferPointer(rebasing: $0[0..<n]), segmentBase: baseSeq) }
    }

    /// The header of the block at `offset`, without reading its payload (for walks over a
    /// segment's headers); nil when it is cut short or invalid.
    func readHeader(at offset: Int64) throws -> BlockHeader? {
        guard case .success(let header) = try parseHeader(at: offset, alone: true),
              offset + Int64(header.totalSize) <= limit else { return nil }
        return header
    }

    /// Reads and verifies the block at `offset`. Without `keepingPayload` (recovery, which only
    /// needs to know the block is whole), a payload that fits the window is checked where it
    /// lies and not copied into ``payload``.
    func readBlock(at offset: Int64, keepingPayload: Bool = true) throws -> BlockRead {
        guard let parsed = try parseHeader(at: offset) else { return .truncated }
        guard case .success(let header) = parsed else {
            if case .failure(let invalid) = parsed { return .corrupt("block header at offset \(offset): \(invalid)") }
            return .corrupt("block header at offset \(offset)")
        }
        let payloadOffset = offset + Int64(header.headerSize)
        guard payloadOffset + Int64(header.storedLength) <= limit else { return .truncated }
        let length = Int(header.storedLength)
        let crc: UInt32
        if !keepingPayload, let area = try windowed(payloadOffset, count: length) {
            guard area.count == length else { return .truncated }
            crc = window.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[area])) }
        } else {
            if payloadBuffer.count < length { payloadBuffer = [UInt8](repeating: 0, count: length) }
            payloadCount = 0  // a failed or short read leaves no stale payload behind
            let count = try payloadBuffer.withUnsafeMutableBytes {
                try read(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<length]), at: payloadOffset)
            }
            guard count == length else { return .truncated }
            payloadCount = length
            crc = payloadBuffer.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[0..<length])) }
        }
        guard crc == header.payloadCRC else {
            return .corrupt("block at offset \(offset): payload checksum mismatch")
        }
        return .valid(header)
    }

    /// Reads `buffer.count` bytes at `offset` (below `limit`) through the window; fewer only at
    /// the end of the file. A read larger than half the window goes to the file directly.
    private func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws -> Int {
        guard let area = try windowed(offset, count: buffer.count) else { return try file.read(into: buffer, at: offset) }
        guard !area.isEmpty else { return 0 }
        window.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[area])) }
        return area.count
    }

    /// Where in the window the `count` bytes at `offset` (below `limit`) are, refilling it from
    /// `offset` if they are not all there: the range, shorter only at the end of the file; nil
    /// for a request larger than half the window (read it directly).
    private func windowed(_ offset: Int64, count: Int) throws -> Range<Int>? {
        if offset < windowStart || offset + Int64(count) > windowStart + Int64(windowCount) {
            guard count <= Self.windowSize / 2 else { return nil }
            if window.isEmpty { window = [UInt8](repeating: 0, count: Self.windowSize) }
            let want = Int(max(Int64(count), min(Int64(Self.windowSize), limit - offset)))
            windowStart = offset
            windowCount = 0  // a failed read leaves no stale window behind
            windowCount = try window.withUnsafeMutableBytes {
                try file.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<want]), at: offset)
            }
        }
        let start = Int(offset - windowStart)
        return start..<start + max(0, min(count, windowCount - start))
    }

    /// Finds the next valid block strictly after `offset`, scanning for either block magic.
    /// Reads the rest of the segment once in 1 MiB chunks, plus the payloads of the candidates
    /// whose header checks (to verify their CRC): at most `maxStoredLength` (65 MiB) plus twice the rest of the
    /// segment in all. Damage passes a header check about once in 2^16 to 2^32 candidates, so
    /// only forged headers (each claiming the rest of the file) could need more, and would make
    /// the scan quadratic: past the budget it throws `corrupt` instead of going on.
    ///
    /// A valid block that `wanted` refuses (a stale copy of an earlier block) is passed over
    /// like damage, within the same budget: recovery needs the next block that continues the
    /// seqs, and a reader the next one holding a record it has not returned, not the first
    /// valid one (FORMAT.md §6).
    func resync(after offset: Int64, wanted: (BlockHeader) -> Bool = { _ in true }) throws -> (offset: Int64, header: BlockHeader)? {
        let chunkSize = 1 << 20
        var budget = Int64(Format.maxStoredLength) + 2 * max(0, limit - offset)
        var start = offset + 1
        var chunk = [UInt8](repeating: 0, count: chunkSize + Format.blockMagic.count)
        while start + Int64(Format.compactBlockHeaderSize) <= limit {
            let want = Int(min(Int64(chunk.count), limit - start))
            let n = try chunk.withUnsafeMutableBytes { try file.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<want]), at: start) }
            guard n >= Format.blockMagic.count else { return nil }
            var i = 0
            while i + Format.blockMagic.count <= n {
                let full = chunk[i] == Format.blockMagic[0] && chunk[i + 1] == Format.blockMagic[1]
                    && chunk[i + 2] == Format.blockMagic[2] && chunk[i + 3] == Format.blockMagic[3]
                let compact = chunk[i] == Format.compactBlockMagic
                if full || compact {
                    // Check the header in the chunk first: most candidates of a one-byte magic
                    // fail their header check, and need no read of their own.
                    let end = min(n, i + Format.blockHeaderSize)
                    let inChunk = end - i >= (compact ? Format.compactBlockHeaderSize : Format.blockHeaderSize)
                    let parsed = inChunk ? chunk.withUnsafeBytes {
                        try? BlockHeader.parse(UnsafeRawBufferPointer(rebasing: $0[i..<end]), segmentBase: baseSeq).get()
                    } : nil
                    let candidate = start + Int64(i)
                    // Chunks overlap by a header less a byte: a header cut off by the end of a
                    // chunk that is not the segment's is parsed whole by the next chunk, and
                    // charged there for what it claims. Only one cut off by the limit itself
                    // is read here, and could claim no more than the few bytes left.
                    let cutByLimit = !inChunk && start + Int64(n) >= limit
                    if cutByLimit || parsed != nil {
                        budget -= min(parsed.map { Int64($0.totalSize) } ?? .max, limit - candidate)
                        if budget < 0 {
                            throw SpoolError(.corrupt, "gave up searching for a valid block after offset \(offset): too many forged block headers", path: path)
                        }
                        if case .valid(let header) = try readBlock(at: candidate), wanted(header) {
                            return (candidate, header)
                        }
                    }
                }
                i += 1
            }
            // A chunk that reached the limit had every possible block start looked at (one in
            // its last bytes is cut off by the limit and was read as such): nothing is left.
            if start + Int64(n) >= limit { return nil }
            // Step so that a header straddling the chunk boundary is parsed whole next time.
            start += Int64(max(1, n - Format.blockHeaderSize + 1))
        }
        return nil
    }
}
