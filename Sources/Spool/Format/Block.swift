/// The header in front of every block, in one of two encodings (FORMAT.md §3): the 40-byte
/// full form, or the 18-byte compact form when every field fits (small blocks, where a 40-byte
/// header would cost as much as the compressed record).
struct BlockHeader: Equatable {
    enum Form: Equatable { case full, compact }

    var codec: UInt8
    var flags: UInt8
    var firstSeq: UInt64
    var recordCount: UInt32
    var storedLength: UInt32
    var rawLength: UInt32
    var dictionaryID: UInt32
    var payloadCRC: UInt32
    var form: Form = .full

    /// The seq just past the block's last record.
    var endSeq: UInt64 { firstSeq &+ UInt64(recordCount) }
    /// Bytes of the header itself.
    var headerSize: Int { form == .full ? Format.blockHeaderSize : Format.compactBlockHeaderSize }
    /// Bytes the whole block takes in its segment.
    var totalSize: Int { headerSize + Int(storedLength) }
    /// Whether the payload is encrypted (flags bit 0).
    var isEncrypted: Bool { flags & Format.flagEncrypted != 0 }

    /// Why bytes are not a valid block header.
    enum Invalid: Error, Equatable {
        case badMagic, badChecksum, badField(String)
    }

    /// Parses and validates the header at the start of `bytes` (at most 40 bytes are read):
    /// magic, header checksum, then every field's bounds. A header that passes can be trusted
    /// for lengths (they are bounded by the format's maxima). `segmentBase` is the base seq of
    /// the segment it is in (compact headers store their first seq relative to it).
    static func parse(_ bytes: UnsafeRawBufferPointer, segmentBase: UInt64) -> Result<BlockHeader, Invalid> {
        if bytes.count >= 1, bytes[0] == Format.compactBlockMagic {
            return parseCompact(bytes, segmentBase: segmentBase)
        }
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
        // An end seq past the ceiling is damage; accepted, it would make the next seq overflow.
        guard header.firstSeq <= Format.seqCeiling - UInt64(header.recordCount) else {
            return .failure(.badField("end seq passes the seq ceiling"))
        }
        return header.validated()
    }

    private static func parseCompact(_ bytes: UnsafeRawBufferPointer, segmentBase: UInt64) -> Result<BlockHeader, Invalid> {
        guard bytes.count >= Format.compactBlockHeaderSize else { return .failure(.badField("short header")) }
        let check = loadLE(bytes, 16, as: UInt16.self)
        let computed = UInt16(truncatingIfNeeded: CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<16])))
        guard check == computed else { return .failure(.badChecksum) }
        let delta = UInt64(loadLE(bytes, 4, as: UInt32.self))
        let count = UInt32(bytes[2])
        guard segmentBase <= Format.seqCeiling, delta + UInt64(count) <= Format.seqCeiling - segmentBase else {
            return .failure(.badField("end seq passes the seq ceiling"))
        }
        let header = BlockHeader(
            codec: bytes[1] & 0x0F, flags: bytes[1] >> 4,
            firstSeq: segmentBase + delta,
            recordCount: count,
            storedLength: UInt32(loadLE(bytes, 8, as: UInt16.self)),
            rawLength: UInt32(loadLE(bytes, 10, as: UInt16.self)),
            dictionaryID: UInt32(bytes[3]),
            payloadCRC: loadLE(bytes, 12, as: UInt32.self),
            form: .compact)
        return header.validated()
    }

    /// The bounds both forms share.
    private func validated() -> Result<BlockHeader, Invalid> {
        guard codec == Format.codecNone || codec == Format.codecZstd else {
            return .failure(.badField("unknown codec \(codec)"))
        }
        guard flags & ~Format.flagEncrypted == 0 else { return .failure(.badField("unsupported flags \(flags)")) }
        if codec == Format.codecNone, dictionaryID != 0 {
            return .failure(.badField("dictionary \(dictionaryID) on an uncompressed block"))
        }
        guard recordCount > 0, Int(recordCount) <= Format.maxRecordsPerBlock else {
            return .failure(.badField("record count \(recordCount)"))
        }
        // Each record takes at least a length and a timestamp byte; a compact block's lone
        // record has no length.
        let minimumRaw = form == .compact && recordCount == 1 ? 1 : 2 * Int(recordCount)
        guard Int(rawLength) <= Format.maxRawLength, Int(rawLength) >= minimumRaw else {
            return .failure(.badField("raw length \(rawLength)"))
        }
        let overhead = isEncrypted ? UInt32(Format.encryptionOverhead) : 0
        guard Int(storedLength) <= Format.maxStoredLength, storedLength > overhead else {
            return .failure(.badField("stored length \(storedLength)"))
        }
        if codec == Format.codecNone, storedLength != rawLength + overhead {
            return .failure(.badField("stored length differs from raw length for an uncompressed block"))
        }
        return .success(self)
    }

    /// Whether these fields fit the compact form in a segment based at `segmentBase`
    /// (`storedLength` may still grow by the encryption overhead, which is allowed for).
    static func fitsCompact(firstSeq: UInt64, segmentBase: UInt64, count: Int, rawLength: Int, dictionaryID: UInt32) -> Bool {
        firstSeq >= segmentBase && firstSeq - segmentBase <= UInt64(UInt32.max)
            && count <= Int(UInt8.max) && rawLength + Format.encryptionOverhead <= Int(UInt16.max)
            && dictionaryID <= UInt32(UInt8.max)
    }

    /// Writes this header's encoding (`headerSize` bytes, with its check) over
    /// `out[offset..<offset + headerSize]` (which must exist): the encoder reserves the room
    /// and fills it in place, without a buffer. A compact header needs its segment's base seq.
    func store(into out: inout [UInt8], at offset: Int, segmentBase: UInt64 = 0) {
        switch form {
        case .full:
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
        case .compact:
            out[offset] = Format.compactBlockMagic
            out[offset + 1] = codec | flags << 4
            out[offset + 2] = UInt8(recordCount)
            out[offset + 3] = UInt8(dictionaryID)
            out.storeLE(UInt32(firstSeq - segmentBase), at: offset + 4)
            out.storeLE(UInt16(storedLength), at: offset + 8)
            out.storeLE(UInt16(rawLength), at: offset + 10)
            out.storeLE(payloadCRC, at: offset + 12)
            let crc = out.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[offset..<offset + 16])) }
            out.storeLE(UInt16(truncatingIfNeeded: crc), at: offset + 16)
        }
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

/// A position in a verified records area (FORMAT.md §3.3), read one record at a time: a
/// block then costs memory in proportion to its raw bytes, never to its record count (a block
/// may hold millions of empty records). ``check(_:header:)`` walks every record's
/// framing first without allocating, so a block whose records do not decode is reported whole,
/// before any of them is returned; after it, ``next(in:)`` cannot fail.
struct RecordsWalk {
    let header: BlockHeader
    private let timestampBase: Int64
    /// Offset of the next record's framing in the area.
    private var offset = 0
    /// The seq of the next record.
    private(set) var nextSeq: UInt64
    /// The timestamp of the record before the next one (the next one's delta applies to it).
    private var timestamp: Int64

    /// `timestampBase` is what the first record's timestamp delta is added to: 0 in a full
    /// block, the segment's created ms in a compact one (see `SegmentReader.timestampBase(for:)`).
    init(header: BlockHeader, timestampBase: Int64) {
        self.header = header
        self.timestampBase = timestampBase
        nextSeq = header.firstSeq
        timestamp = timestampBase
    }

    /// Whether every record has been read.
    var isAtEnd: Bool { nextSeq >= header.endSeq }

    /// Back to the first record.
    mutating func rewind() { self = RecordsWalk(header: header, timestampBase: timestampBase) }

    /// Whether `area` holds exactly `header.recordCount` records whose lengths stay inside it.
    static func check(_ area: UnsafeRawBufferPointer, header: BlockHeader) -> Bool {
        var walk = RecordsWalk(header: header, timestampBase: 0)
        while !walk.isAtEnd {
            guard walk.step(area) != nil else { return false }
        }
        return walk.offset == area.count
    }

    /// The next record (its payload copied out of `area`), or nil at the end.
    /// `area` must be the one ``check(_:header:)`` passed.
    mutating func next(in area: UnsafeRawBufferPointer) -> Record? {
        guard !isAtEnd, let (seq, timestamp, payload) = step(area) else { return nil }
        return Record(seq: seq, timestamp: timestamp, payload: Array(UnsafeRawBufferPointer(rebasing: area[payload])))
    }

    /// Moves past the records before `seq` without copying them.
    mutating func skip(to seq: UInt64, in area: UnsafeRawBufferPointer) {
        while nextSeq < seq, !isAtEnd, step(area) != nil {}
    }

    /// Reads the next record's framing: its seq, timestamp and payload's range in `area`.
    private mutating func step(_ area: UnsafeRawBufferPointer) -> (UInt64, Int64, Range<Int>)? {
        var reader = ByteReader(area, offset: offset)
        let length: UInt64
        if header.form == .compact && header.recordCount == 1 {
            // A compact block of one record leaves out its length: the rest of the area is the payload.
            guard let delta = reader.readVarint() else { return nil }
            timestamp = timestamp &+ unzigzag(delta)
            length = UInt64(reader.remaining)
        } else {
            guard let recordLength = reader.readVarint(), recordLength <= UInt64(reader.remaining),
                  let delta = reader.readVarint() else { return nil }
            timestamp = timestamp &+ unzigzag(delta)
            length = recordLength
        }
        let start = reader.offset
        guard reader.readBytes(Int(length)) != nil else { return nil }
        offset = reader.offset
        let seq = nextSeq
        nextSeq += 1
        return (seq, timestamp, start..<offset)
    }
}

/// Where a block is being written: what a compact header is relative to, and whether the
/// segment may hold one (version 1 segments hold full headers only).
struct SegmentContext: Equatable {
    var baseSeq: UInt64
    var createdMillis: Int64
    var version: UInt16 = Format.segmentVersion
}

/// Seals pending blocks into their stored form: compress (zstd, one frame per block, with the
/// current dictionary if any), encrypt (if a key is set), checksum, header. Owns a reusable
/// compression context and scratch buffer. Not thread-safe: the writer thread's.
final class BlockEncoder {
    /// Zeros that hold a header's place until it is written: appended from an array, not
    /// `repeatElement`, which unspecialized (a debug build) is a generic loop per byte.
    private static let headerSpace = [UInt8](repeating: 0, count: Format.blockHeaderSize)
    private let compressor: ZstdCompressor
    /// The dictionary new blocks are compressed with; nil for none. Set between blocks.
    var dictionary: ZstdDictionary?
    /// The key new blocks are encrypted with; nil to write them in the clear.
    var sealer: BlockSealer?
    /// A compact block's records area, its first timestamp rebased on the segment's.
    private var rebased: [UInt8] = []
    /// Where zstd writes a frame before only its bytes are appended to the caller's output:
    /// growing `out` by the frame's bound first would zero 64 KiB per block and then move the
    /// frame back over a compact block's magic (together about 2% of a sealing run). Never
    /// initialized; as large as the largest bound asked so far.
    private var scratch = UnsafeMutableRawBufferPointer(start: nil, count: 0)

    init(level: Int32) { compressor = ZstdCompressor(level: level) }

    deinit { scratch.deallocate() }

    /// ``scratch``, at least `count` bytes long.
    private func scratch(atLeast count: Int) -> UnsafeMutableRawBufferPointer {
        if scratch.count < count {
            scratch.deallocate()
            scratch = .allocate(byteCount: count, alignment: 16)
        }
        return scratch
    }

    /// Polled while a block is compressed (``ZstdCompressor/interruption``); nil for none.
    var interruption: StopFlag? {
        get { compressor.interruption }
        set { compressor.interruption = newValue }
    }

    /// Appends the stored block for `block` (header then payload) to `out` and returns its header.
    ///
    /// A block whose fields fit gets the compact header (FORMAT.md §3.2): its first timestamp
    /// is rebased on the segment's created ms and a zstd frame loses its magic number. A block
    /// that zstd does not make smaller is stored uncompressed (codec 0, no dictionary).
    @discardableResult
    func encode(_ block: PendingBlock, in segment: SegmentContext, into out: inout [UInt8]) throws -> BlockHeader {
        var form = BlockHeader.Form.full
        if segment.version >= 2, BlockHeader.fitsCompact(firstSeq: block.firstSeq, segmentBase: segment.baseSeq, count: block.count,
                                   rawLength: block.raw.count, dictionaryID: dictionary?.id ?? 0),
           rebaseFirstTimestamp(block.raw, count: block.count, on: segment.createdMillis) {
            form = .compact
        }
        return try form == .compact
            ? rebased.withUnsafeBytes { try encode(block, raw: $0, form: form, segment: segment, into: &out) }
            : block.raw.withUnsafeBytes { try encode(block, raw: $0, form: form, segment: segment, into: &out) }
    }

    private func encode(_ block: PendingBlock, raw: UnsafeRawBufferPointer, form: BlockHeader.Form,
                        segment: SegmentContext, into out: inout [UInt8]) throws -> BlockHeader {
        let headerStart = out.count
        let headerSize = form == .full ? Format.blockHeaderSize : Format.compactBlockHeaderSize
        let payloadStart = headerStart + headerSize
        let frame = scratch(atLeast: ZstdCompressor.bound(raw.count))
        let frameSize = try compressor.compress(raw, into: frame, dictionary: dictionary, contentSize: form == .full)
        var payload = UnsafeRawBufferPointer(rebasing: frame[..<frameSize])
        if form == .compact {
            // Every frame starts with the same 4 bytes: a compact block does not store them.
            assert(payload.prefix(4).elementsEqual(Format.zstdFrameMagic))
            payload = UnsafeRawBufferPointer(rebasing: payload[Format.zstdFrameMagic.count...])
        }
        var codec = Format.codecZstd
        var dictionaryID = dictionary?.id ?? 0
        if payload.count >= raw.count {
            codec = Format.codecNone
            dictionaryID = 0
            payload = raw
        }
        var storedSize = payload.count
        out.append(contentsOf: Self.headerSpace[0..<headerSize])
        out.append(contentsOf: payload)
        var header = BlockHeader(
            codec: codec, flags: 0, firstSeq: block.firstSeq, recordCount: UInt32(block.count),
            storedLength: UInt32(storedSize), rawLength: UInt32(raw.count), dictionaryID: dictionaryID, payloadCRC: 0,
            form: form)
        if let sealer {
            header.flags |= Format.flagEncrypted
            try sealer.seal(&out, payloadFrom: payloadStart, header: header)
            storedSize = out.count - payloadStart
            header.storedLength = UInt32(storedSize)
        }
        header.payloadCRC = out.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[payloadStart..<payloadStart + storedSize])) }
        header.store(into: &out, at: headerStart, segmentBase: segment.baseSeq)
        return header
    }

    /// Fills `rebased` with the compact records area of `raw` (`count` records): the first
    /// timestamp delta is from `base` instead of 0 (a few bytes instead of six), and a lone
    /// record leaves out its length. False if `raw` does not parse (it always does: the log
    /// framed it) or the result would not fit a compact header.
    private func rebaseFirstTimestamp(_ raw: [UInt8], count: Int, on base: Int64) -> Bool {
        raw.withUnsafeBytes { bytes in
            var reader = ByteReader(bytes)
            guard let length = reader.readVarint(), let delta = reader.readVarint() else { return false }
            let rest = bytes.count - reader.remaining
            rebased.removeAll(keepingCapacity: true)
            if count > 1 { rebased.appendVarint(length) }
            rebased.appendVarint(zigzag(unzigzag(delta) &- base))
            rebased.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[rest...]))
            return rebased.count + Format.encryptionOverhead <= Int(UInt16.max)
        }
    }
}
