/// Every constant of Spool's on-disk format, in one place. FORMAT.md explains each.
///
/// All integers are little-endian. Offsets are from the start of the structure.
enum Format {
    // MARK: Files

    /// Segment files are named by the seq of their first record, zero-padded to 20 digits.
    static let segmentSuffix = ".seg"
    static let segmentNameDigits = 20
    static let metaFileName = "META"
    /// `SYNCED`: the synced watermark (FORMAT.md §6), laid out as a consumer offset file (§5).
    static let watermarkFileName = "SYNCED"
    static let lockFileName = "LOCK"
    /// Where the log was last opened for writing, and its epochs (FORMAT.md §13).
    static let epochsFileName = "EPOCHS"
    static let consumersDirectory = "consumers"
    /// `deadletter/<consumer>/`: a log of the records a server refused (FORMAT.md §1).
    static let deadLetterDirectory = "deadletter"
    static let offsetSuffix = ".offset"
    /// `consumers/<name>.lock`: held by the one process that reads and commits the consumer.
    static let consumerLockSuffix = ".lock"
    static let temporarySuffix = ".tmp"
    /// Appended to a segment file that does not fit the log's sequence when it is set aside (§6).
    static let misfitSuffix = ".misfit"
    /// A segment being moved into place after a power cut's hole (FORMAT.md §6 step 4): written
    /// whole and synced under this name, renamed to its segment name once the segment before it
    /// is cut at the hole.
    static let movingSuffix = ".moving"

    // MARK: Segment header (64 bytes)

    /// "SPOOLSEG"
    static let segmentMagic: [UInt8] = Array("SPOOLSEG".utf8)
    /// The newest segment version (2: compact block headers may appear). Readers accept 1 and 2.
    static let segmentVersion: UInt16 = 2
    static let segmentHeaderSize = 64
    // 0: magic[8] | 8: version u16 | 10: header size u16 | 12: reserved u32 (0)
    // 16: base seq u64 | 24: created ms i64 | 32: log id [16] | 48: reserved [12] (0)
    // 60: CRC-32C of bytes 0..<60

    // MARK: Block header (40 bytes)

    /// "SPBK"
    static let blockMagic: [UInt8] = Array("SPBK".utf8)
    static let blockHeaderSize = 40
    // 0: magic[4] | 4: codec u8 | 5: flags u8 | 6: reserved u16 (0)
    // 8: first seq u64 | 16: record count u32 | 20: stored length u32
    // 24: raw length u32 | 28: dictionary id u32 | 32: payload CRC-32C u32
    // 36: header CRC-32C of bytes 0..<36

    // MARK: Compact block header (18 bytes), for blocks whose fields fit (FORMAT.md §3.2)

    /// One byte, 0xC5: never the first byte of a full header ("S").
    static let compactBlockMagic: UInt8 = 0xC5
    static let compactBlockHeaderSize = 18
    // 0: magic u8 | 1: codec (bits 0-3) and flags (bits 4-7) u8 | 2: record count u8 | 3: dictionary id u8
    // 4: first seq - segment base seq u32 | 8: stored length u16 | 10: raw length u16
    // 12: payload CRC-32C u32 | 16: low 16 bits of the CRC-32C of bytes 0..<16
    // The first record's timestamp is a delta from the segment's created ms, not from 0; a
    // block of one record leaves out its length; a zstd payload omits the frame's magic number.

    /// The 4 bytes every zstd frame starts with (omitted from compact blocks' payloads).
    static let zstdFrameMagic: [UInt8] = [0x28, 0xB5, 0x2F, 0xFD]

    /// Codec 0: the records area is stored as is.
    static let codecNone: UInt8 = 0
    /// Codec 1: the records area is one zstd frame.
    static let codecZstd: UInt8 = 1
    /// Flags bit 0: the stored payload is encrypted (FORMAT.md §3.1). No other flag is defined.
    static let flagEncrypted: UInt8 = 1

    // MARK: Encrypted payload (flags bit 0): key id u32 | nonce [12] | ciphertext | tag [16]

    static let nonceSize = 12
    static let tagSize = 16
    /// Bytes an encrypted payload adds to the plaintext: key id, nonce, tag.
    static let encryptionOverhead = 4 + nonceSize + tagSize
    /// The associated data is header bytes 0..<20 and 24..<32, then the log id: 44 bytes.
    static let associatedDataSize = 20 + 8 + 16

    // MARK: Dictionary file `dictionaries/<id>.zdict` (32-byte header, then the zstd dictionary)

    static let dictionariesDirectory = "dictionaries"
    static let dictionarySuffix = ".zdict"
    /// "SPOOLDIC"
    static let dictionaryMagic: [UInt8] = Array("SPOOLDIC".utf8)
    static let dictionaryVersion: UInt16 = 1
    static let dictionaryHeaderSize = 32
    /// The largest dictionary a log stores.
    static let maxDictionarySize = 1024 * 1024
    // 0: magic[8] | 8: version u16 | 10: header size u16 | 12: dictionary id u32
    // 16: dictionary length u32 | 20: CRC-32C of the dictionary bytes | 24: reserved u32 (0)
    // 28: CRC-32C of bytes 0..<28

    // MARK: Key check file `keys/<id>.check` (56 bytes)

    static let keysDirectory = "keys"
    static let keyCheckSuffix = ".check"
    /// "SPOOLKEY"
    static let keyCheckMagic: [UInt8] = Array("SPOOLKEY".utf8)
    static let keyCheckVersion: UInt16 = 1
    static let keyCheckSize = 56
    // 0: magic[8] | 8: version u16 | 10: reserved u16 (0) | 12: key id u32
    // 16: HMAC-SHA256(key, "spool key check" | key id u32 | log id [16]) [32] | 48: reserved u32 (0)
    // 52: CRC-32C of bytes 0..<52

    /// The largest records area any block may have: a 64 MiB record plus its framing.
    static let maxRawLength = 64 * 1024 * 1024 + 64
    /// The largest stored payload any block may have (zstd's bound on `maxRawLength`, rounded up).
    static let maxStoredLength = 65 * 1024 * 1024
    /// The most records one block may hold.
    static let maxRecordsPerBlock = 16 * 1024 * 1024

    // MARK: Offset file (two 32-byte slots at offsets 0 and 512)

    /// "SPOF"
    static let offsetMagic: [UInt8] = Array("SPOF".utf8)
    static let offsetVersion: UInt16 = 1
    static let offsetSlotSize = 32
    static let offsetSlotStride = 512
    static let offsetFileSize = 1024
    // 0: magic[4] | 4: version u16 | 6: reserved u16 (0) | 8: generation u64
    // 16: next seq u64 | 24: reserved u32 (0) | 28: CRC-32C of bytes 0..<28

    // MARK: META file (64 bytes)

    /// "SPOOLMET"
    static let metaMagic: [UInt8] = Array("SPOOLMET".utf8)
    static let metaVersion: UInt16 = 1
    static let metaSize = 64
    // 0: magic[8] | 8: version u16 | 10: reserved u16 (0) | 12: reserved u32 (0)
    // 16: log id [16] | 32: created ms i64 | 40: reserved [20] (0) | 60: CRC-32C of bytes 0..<60

    // MARK: Seqs

    /// The ceiling on every seq the format stores (FORMAT.md §1): a record's seq is below it,
    /// and a base seq, a block's end seq (first seq + record count) and an offset's next seq are
    /// at most it. A value above it in a file is damage (or a forgery), treated as corrupt
    /// where it is parsed, so no file can make the next seq overflow. 2^62 rather than 2^64:
    /// a seq plus any count a block can hold, or the difference of two seqs, then fits an
    /// `Int` (and a signed 64-bit integer in any other reader) with room to spare; 2^62
    /// records at a billion a second take 146 years to write.
    static let seqCeiling: UInt64 = 1 << 62

    /// The name of the segment whose first record is `baseSeq`.
    static func segmentName(_ baseSeq: UInt64) -> String {
        let digits = String(baseSeq)
        return String(repeating: "0", count: segmentNameDigits - digits.count) + digits + segmentSuffix
    }

    /// The name of dictionary `id`'s file (in `dictionariesDirectory`): 10 decimal digits and `.zdict`.
    static func dictionaryName(_ id: UInt32) -> String { paddedDecimal(id) + dictionarySuffix }

    /// The name of key `id`'s check file (in `keysDirectory`): 10 decimal digits and `.check`.
    static func keyCheckName(_ id: UInt32) -> String { paddedDecimal(id) + keyCheckSuffix }

    /// The id a dictionary file name stands for, or nil if the name is not a dictionary's.
    static func dictionaryID(ofFileNamed name: String) -> UInt32? {
        guard name.hasSuffix(dictionarySuffix) else { return nil }
        let digits = name.utf8.dropLast(dictionarySuffix.utf8.count)
        guard digits.count == 10, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return UInt32(String(decoding: digits, as: UTF8.self))
    }

    private static func paddedDecimal(_ id: UInt32) -> String {
        let digits = String(id)
        return String(repeating: "0", count: 10 - digits.count) + digits
    }

    /// The base seq a segment file name stands for, or nil if the name is not a segment's: 20
    /// digits for a number above `seqCeiling` (a segment there could only make the next seq
    /// overflow) are a foreign name like any other.
    static func baseSeq(ofSegmentNamed name: String) -> UInt64? {
        guard name.hasSuffix(segmentSuffix) else { return nil }
        let digits = name.utf8.dropLast(segmentSuffix.utf8.count)
        guard digits.count == segmentNameDigits, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let base = UInt64(String(decoding: digits, as: UTF8.self)), base <= seqCeiling else { return nil }
        return base
    }
}
