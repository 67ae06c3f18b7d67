/// The 64-byte header at the start of every segment file. See FORMAT.md, "Segment files".
struct SegmentHeader: Equatable {
    var baseSeq: UInt64
    var createdMillis: Int64
    var logID: LogID
    /// 1: full block headers only; 2: compact ones too (FORMAT.md §2). Writers write the newest.
    var version: UInt16 = Format.segmentVersion
    /// Bit 0: the segment was rewritten by cold recompression (FORMAT.md §2.1). Other bits are
    /// 0 as written and ignored as read.
    var flags: UInt32 = 0

    /// Whether cold recompression wrote this segment.
    var isRecompressed: Bool { flags & Self.recompressedFlag != 0 }
    static let recompressedFlag: UInt32 = 1

    func encoded() -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(Format.segmentHeaderSize)
        out.append(contentsOf: Format.segmentMagic)
        out.appendLE(version)
        out.appendLE(UInt16(Format.segmentHeaderSize))
        out.appendLE(flags)
        out.appendLE(baseSeq)
        out.appendLE(createdMillis)
        logID.append(to: &out)
        out.append(contentsOf: repeatElement(0, count: 12))
        out.appendLE(CRC32C.checksum(out))
        return out
    }

    enum Invalid: Error, Equatable { case short, badMagic, badChecksum, unsupportedVersion(UInt16), unsupportedHeaderSize(UInt16) }

    static func parse(_ bytes: UnsafeRawBufferPointer) -> Result<SegmentHeader, Invalid> {
        guard bytes.count >= Format.segmentHeaderSize else { return .failure(.short) }
        for i in 0..<8 where bytes[i] != Format.segmentMagic[i] { return .failure(.badMagic) }
        let crc = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<60]))
        guard crc == loadLE(bytes, 60, as: UInt32.self) else { return .failure(.badChecksum) }
        let version = loadLE(bytes, 8, as: UInt16.self)
        guard (1...Format.segmentVersion).contains(version) else { return .failure(.unsupportedVersion(version)) }
        let headerSize = loadLE(bytes, 10, as: UInt16.self)
        guard headerSize == UInt16(Format.segmentHeaderSize) else { return .failure(.unsupportedHeaderSize(headerSize)) }
        return .success(SegmentHeader(
            baseSeq: loadLE(bytes, 16, as: UInt64.self),
            createdMillis: loadLE(bytes, 24, as: Int64.self),
            logID: LogID(bytes: bytes[32..<48]),
            version: version,
            flags: loadLE(bytes, 12, as: UInt32.self)))
    }
}

/// The 64-byte META file: the log's identity. See FORMAT.md, "META".
struct MetaRecord: Equatable {
    var logID: LogID
    var createdMillis: Int64

    func encoded() -> [UInt8] {
        var out = [UInt8]()
        out.append(contentsOf: Format.metaMagic)
        out.appendLE(Format.metaVersion)
        out.appendLE(UInt16(0))
        out.appendLE(UInt32(0))
        logID.append(to: &out)
        out.appendLE(createdMillis)
        out.append(contentsOf: repeatElement(0, count: 20))
        out.appendLE(CRC32C.checksum(out))
        return out
    }

    /// The version of a META whose magic and CRC check, whatever the version (and the size,
    /// which a newer version may grow); nil for a damaged one (whose version bytes may be the damage).
    static func intactVersion(_ bytes: [UInt8]) -> UInt16? {
        guard bytes.count >= Format.metaSize, Array(bytes[0..<8]) == Format.metaMagic else { return nil }
        return bytes.withUnsafeBytes { raw in
            CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[0..<60])) == loadLE(raw, 60, as: UInt32.self)
                ? loadLE(raw, 8, as: UInt16.self) : nil
        }
    }

    static func parse(_ bytes: [UInt8]) -> MetaRecord? {
        guard bytes.count == Format.metaSize, Array(bytes[0..<8]) == Format.metaMagic else { return nil }
        return bytes.withUnsafeBytes { raw in
            guard CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[0..<60])) == loadLE(raw, 60, as: UInt32.self),
                  loadLE(raw, 8, as: UInt16.self) == Format.metaVersion else { return nil }
            return MetaRecord(logID: LogID(bytes: bytes[16..<32]), createdMillis: loadLE(raw, 32, as: Int64.self))
        }
    }
}

/// One slot of a consumer's offset file. See FORMAT.md, "Consumer offsets".
struct OffsetSlot: Equatable {
    var generation: UInt64
    var nextSeq: UInt64

    func encoded() -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(Format.offsetSlotSize)
        out.append(contentsOf: Format.offsetMagic)
        out.appendLE(Format.offsetVersion)
        out.appendLE(UInt16(0))
        out.appendLE(generation)
        out.appendLE(nextSeq)
        out.appendLE(UInt32(0))
        out.appendLE(CRC32C.checksum(out))
        return out
    }

    static func parse(_ bytes: UnsafeRawBufferPointer) -> OffsetSlot? {
        guard bytes.count >= Format.offsetSlotSize else { return nil }
        for i in 0..<4 where bytes[i] != Format.offsetMagic[i] { return nil }
        guard CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<28])) == loadLE(bytes, 28, as: UInt32.self),
              loadLE(bytes, 4, as: UInt16.self) == Format.offsetVersion else { return nil }
        // A next seq past the ceiling was never committed (commits stop at the log's next seq):
        // the slot is invalid like a damaged one, so it cannot push the log's seqs to overflow.
        // Likewise a generation past it: one commit adds one, so no file written by commits
        // holds one, and the next commit's `generation + 1` must not overflow.
        let nextSeq = loadLE(bytes, 16, as: UInt64.self)
        let generation = loadLE(bytes, 8, as: UInt64.self)
        // (Below it: the next commit's generation must parse too, or every later commit would
        // be lost to the older slot on reopen.)
        guard nextSeq <= Format.seqCeiling, generation < Format.seqCeiling else { return nil }
        return OffsetSlot(generation: generation, nextSeq: nextSeq)
    }
}
