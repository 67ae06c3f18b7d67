/// The fixed header in front of every block. See FORMAT.md, "Blocks".
struct BlockHeader: Equatable {
    var codec: UInt8
    var flags: UInt8
    var firstSeq: UInt64
    var recordCount: UInt32
    var storedLength: UInt32
    var rawLength: UInt32
    var dictionaryID: UInt32
    var payloadCRC: UInt32

    /// The seq just past the block's last record.
    var endSeq: UInt64 { firstSeq &+ UInt64(recordCount) }
    /// Bytes the whole block takes in its segment.
    var totalSize: Int { Format.blockHeaderSize + Int(storedLength) }
    /// Whether the payload is encrypted (flags bit 0).
    var isEncrypted: Bool { flags & Format.flagEncrypted != 0 }

    /// Why 40 bytes are not a valid block header.
    enum Invalid: Error, Equatable {
        case badMagic, badChecksum, badField(String)
    }

    /// Parses and validates 40 bytes: magic, header checksum, then every field's bounds.
    /// A header that passes can be trusted for lengths (they are bounded by the format's maxima).
    static func parse(_ bytes: UnsafeRawBufferPointer) -> Result<BlockHeader, Invalid> {
        guard bytes.count >= Format.blockHeaderSize else { return .failure(.badField("short header")) }
        for i in 0..<4 where bytes[i] != Format.blockMagic[i] { return .failure(.badMagic) }
        let stored = loadLE(bytes, 36, as: UInt32.self)
        let computed = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<36]))
        guard stored == computed else { return .failure(.badChecksum) }
        let header = BlockHeader(
            codec: bytes[4], flags: bytes[5],
            firstSeq: loadLE(bytes, 8, as: UInt64.self),
            recordCount: loadLE(bytes, 16, as: UInt32.self),
            storedLength: loadLE(bytes, 20, as: UInt32.self),
            rawLength: loadLE(bytes, 24, as: UInt32.self),
            dictionaryID: loadLE(bytes, 28, as: UInt32.self),
            payloadCRC: loadLE(bytes, 32, as: UInt32.self))
        guard loadLE(bytes, 6, as: UInt16.self) == 0 else { return .failure(.badField("reserved bytes are not zero")) }
        guard header.codec == Format.codecNone || header.codec == Format.codecZstd else {
            return .failure(.badField("unknown codec \(header.codec)"))
        }
        guard header.flags & ~Format.flagEncrypted == 0 else { return .failure(.badField("unsupported flags \(header.flags)")) }
        if header.codec == Format.codecNone, header.dictionaryID != 0 {
            return .failure(.badField("dictionary \(header.dictionaryID) on an uncompressed block"))
        }
        guard header.recordCount > 0, Int(header.recordCount) <= Format.maxRecordsPerBlock else {
            return .failure(.badField("record count \(header.recordCount)"))
        }
        guard Int(header.rawLength) <= Format.maxRawLength, Int(header.rawLength) >= 2 * Int(header.recordCount) else {
            return .failure(.badField("raw length \(header.rawLength)"))
        }
        let overhead = header.isEncrypted ? UInt32(Format.encryptionOverhead) : 0
        guard Int(header.storedLength) <= Format.maxStoredLength, header.storedLength > overhead else {
            return .failure(.badField("stored length \(header.storedLength)"))
        }
        if header.codec == Format.codecNone, header.storedLength != header.rawLength + overhead {
            return .failure(.badField("stored length differs from raw length for an uncompressed block"))
        }
        guard header.firstSeq <= UInt64.max - UInt64(header.recordCount) else { return .failure(.badField("first seq overflows")) }
        return .success(header)
    }

    /// Writes the 40-byte encoding of this header, with its checksum, over `out[offset..<offset + 40]`
    /// (which must exist): the encoder reserves the room and fills it in place, without a buffer.
    func store(into out: inout [UInt8], at offset: Int) {
        for i in 0..<4 { out[offset + i] = Format.blockMagic[i] }
        out[offset + 4] = codec
        out[offset + 5] = flags
        out.storeLE(UInt16(0), at: offset + 6)
        out.storeLE(firstSeq, at: offset + 8)
        out.storeLE(recordCount, at: offset + 16)
        out.storeLE(storedLength, at: offset + 20)
        out.storeLE(rawLength, at: offset + 24)
        out.storeLE(dictionaryID, at: offset + 28)
        out.storeLE(payloadCRC, at: offset + 32)
        let crc = out.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[offset..<offset + 36])) }
        out.storeLE(crc, at: offset + 36)
    }
}

/// The records area of one block being filled by `append`. Not thread-safe: guarded by the log's lock.
///
/// Each record is `varint(payload length)`, `varint(zigzag(timestamp − previous timestamp))`
/// (the first record's previous timestamp is 0), then the payload bytes.
struct PendingBlock {
    var firstSeq: UInt64 = 0
    var count: Int = 0
    var raw: [UInt8] = []
    var lastTimestamp: Int64 = 0
    /// Monotonic nanoseconds when the first record arrived (for the linger deadline).
    var openedAt: UInt64 = 0
    /// Sum of the payload sizes (for lag and statistics).
    var payloadBytes: Int = 0
    /// What this block counts against `Configuration.maxPendingBytes`: `framedSize` of each record.
    var charge: Int = 0

    var isEmpty: Bool { count == 0 }

    /// Bytes a record of `payloadSize` bytes adds to the records area, at most.
    static func framedSize(_ payloadSize: Int) -> Int { payloadSize + 20 }

    mutating func reset(firstSeq: UInt64) {
        self.firstSeq = firstSeq
        count = 0
        raw.removeAll(keepingCapacity: true)
        lastTimestamp = 0
        payloadBytes = 0
        charge = 0
    }

    @inline(__always)
    mutating func add(_ payload: UnsafeRawBufferPointer, timestamp: Int64) {
        raw.appendVarint(UInt64(payload.count))
        raw.appendVarint(zigzag(timestamp &- lastTimestamp))
        raw.append(contentsOf: payload)
        lastTimestamp = timestamp
        count += 1
        payloadBytes += payload.count
        charge += PendingBlock.framedSize(payload.count)
    }
}

/// Decodes a verified records area into records, checking every length against the bounds.
func decodeRecords(_ raw: UnsafeRawBufferPointer, header: BlockHeader) -> [Record]? {
    var reader = ByteReader(raw)
    var records = [Record]()
    records.reserveCapacity(Int(header.recordCount))
    var timestamp: Int64 = 0
    for index in 0..<UInt64(header.recordCount) {
        guard let length = reader.readVarint(), length <= UInt64(reader.remaining),
              let delta = reader.readVarint(),
              let payload = reader.readBytes(Int(length)) else { return nil }
        timestamp = timestamp &+ unzigzag(delta)
        records.append(Record(seq: header.firstSeq + index, timestamp: timestamp, payload: Array(payload)))
    }
    return reader.remaining == 0 ? records : nil
}

/// Seals pending blocks into their stored form: compress (zstd, one frame per block, with the
/// current dictionary if any), encrypt (if a key is set), checksum, header. Owns a reusable
/// compression context. Not thread-safe: the writer thread's.
final class BlockEncoder {
    private let compressor: ZstdCompressor
    /// The dictionary new blocks are compressed with; nil for none. Set between blocks.
    var dictionary: ZstdDictionary?
    /// The key new blocks are encrypted with; nil to write them in the clear.
    var sealer: BlockSealer?

    init(level: Int32) { compressor = ZstdCompressor(level: level) }

    /// Appends the stored block for `block` (header then payload) to `out` and returns its header.
    /// A block that zstd does not make smaller is stored uncompressed (codec 0, no dictionary).
    @discardableResult
    func encode(_ block: PendingBlock, into out: inout [UInt8]) throws -> BlockHeader {
        let headerStart = out.count
        let payloadStart = headerStart + Format.blockHeaderSize
        let bound = ZstdCompressor.bound(block.raw.count)
        out.append(contentsOf: repeatElement(0, count: Format.blockHeaderSize + bound))
        let compressedSize = try block.raw.withUnsafeBytes { source in
            try out.withUnsafeMutableBytes { destination in
                try compressor.compress(source, into: UnsafeMutableRawBufferPointer(rebasing: destination[payloadStart..<payloadStart + bound]),
                                        dictionary: dictionary)
            }
        }
        var codec = Format.codecZstd
        var dictionaryID = dictionary?.id ?? 0
        var storedSize = compressedSize
        if compressedSize >= block.raw.count {
            codec = Format.codecNone
            dictionaryID = 0
            storedSize = block.raw.count
            out.replaceSubrange(payloadStart..<payloadStart + storedSize, with: block.raw)
        }
        out.removeLast(out.count - payloadStart - storedSize)
        var header = BlockHeader(
            codec: codec, flags: 0, firstSeq: block.firstSeq, recordCount: UInt32(block.count),
            storedLength: UInt32(storedSize), rawLength: UInt32(block.raw.count), dictionaryID: dictionaryID, payloadCRC: 0)
        if let sealer {
            header.flags |= Format.flagEncrypted
            try sealer.seal(&out, payloadFrom: payloadStart, header: header)
            storedSize = out.count - payloadStart
            header.storedLength = UInt32(storedSize)
        }
        header.payloadCRC = out.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[payloadStart..<payloadStart + storedSize])) }
        header.store(into: &out, at: headerStart)
        return header
    }
}
