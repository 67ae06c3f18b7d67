import Crypto
import Foundation
import Testing
@testable import Spool

/// A golden log with a dictionary block and an encrypted dictionary block, in
/// Tests/SpoolTests/Golden/codec, decoded byte by byte with FORMAT.md's offsets (§3, §3.1, §8).
/// Regenerate (only for a format change) with SPOOL_WRITE_CODEC_GOLDEN=<path of Golden/codec>.
@Suite struct CodecGoldenTests {
    static let logID = LogID(hex: "00112233445566778899aabbccddeeff")!
    static let key = (0..<32).map { UInt8($0) }
    static let nonce: [UInt8] = Array(0xA0..<0xAC)
    /// A raw-content dictionary (no zstd training involved, so it is easy to read).
    static let dictionary = Array(String(repeating: #"{"event":"screen_view","screen":"home"}{"event":"click","target":"buy"}"#, count: 2).utf8)
    static let texts = [#"{"event":"screen_view","screen":"home"}"#, #"{"event":"click","target":"buy"}"#]
    static let timestamp: Int64 = 1_767_225_600_000

    static func build() throws -> (segment: [UInt8], dictionary: [UInt8]) {
        var bytes = SegmentHeader(baseSeq: 0, createdMillis: timestamp, logID: logID, version: 1).encoded()
        let encoder = BlockEncoder(level: 1)
        encoder.dictionary = try ZstdDictionary(id: 1, bytes: dictionary, level: 1)
        for (index, text) in texts.enumerated() {
            var block = PendingBlock()
            block.reset(firstSeq: UInt64(index))
            Array(text.utf8).withUnsafeBytes { block.add($0, timestamp: timestamp + Int64(index) * 1000) }
            if index == 1 {
                var sealer = BlockSealer(keyID: 7, key: SymmetricKey(data: key), logID: logID)
                sealer.makeNonce = { try! ChaChaPoly.Nonce(data: nonce) }
                encoder.sealer = sealer
            }
            try encoder.encode(block, in: SegmentContext(baseSeq: 0, createdMillis: timestamp, version: 1), into: &bytes)
        }
        return (bytes, DictionaryFile.encoded(id: 1, bytes: dictionary))
    }

    static var goldenDirectory: String { Bundle.module.path(forResource: "Golden", ofType: nil)! + "/codec" }

    @Test func goldenCodecBlocksDecodeFieldByField() throws {
        if let out = ProcessInfo.processInfo.environment["SPOOL_WRITE_CODEC_GOLDEN"] {
            let (segment, dictionaryFile) = try Self.build()
            try? FileManager.default.createDirectory(atPath: out + "/dictionaries", withIntermediateDirectories: true)
            writeFile(out + "/00000000000000000000.seg", segment)
            writeFile(out + "/dictionaries/0000000001.zdict", dictionaryFile)
        }
        let bytes = readFile(Self.goldenDirectory + "/00000000000000000000.seg")
        let file = readFile(Self.goldenDirectory + "/dictionaries/0000000001.zdict")
        func u32(_ b: [UInt8], _ o: Int) -> UInt32 { GoldenBytes(b).u32(o) }
        func u16(_ b: [UInt8], _ o: Int) -> UInt16 { GoldenBytes(b).u16(o) }
        // §8: the dictionary file.
        #expect(Array(file[0..<8]) == Array("SPOOLDIC".utf8))
        #expect(u16(file, 8) == 1 && u16(file, 10) == 32)
        #expect(u32(file, 12) == 1)
        #expect(Int(u32(file, 16)) == file.count - 32)
        #expect(u32(file, 20) == CRC32C.checksum(Array(file[32...])))
        #expect(u32(file, 24) == 0)
        #expect(u32(file, 28) == CRC32C.checksum(Array(file[0..<28])))
        let dictionary = try ZstdDictionary(id: 1, bytes: Array(file[32...]), level: 1)
        // §3: block 1, zstd with dictionary 1, in the clear.
        var o = 64
        #expect(Array(bytes[o..<o + 4]) == Array("SPBK".utf8))
        #expect(bytes[o + 4] == 1 && bytes[o + 5] == 0)
        #expect(u32(bytes, o + 28) == 1)
        var stored = Int(u32(bytes, o + 20))
        var raw = Int(u32(bytes, o + 24))
        #expect(u32(bytes, o + 32) == CRC32C.checksum(Array(bytes[o + 40..<o + 40 + stored])))
        #expect(u32(bytes, o + 36) == CRC32C.checksum(Array(bytes[o..<o + 36])))
        let frame = Array(bytes[o + 40..<o + 40 + stored])
        #expect(Array(frame[0..<4]) == [0x28, 0xB5, 0x2F, 0xFD])
        #expect(frame[4] & 0x03 == 0, "the frame header names no dictionary id")
        var area = [UInt8](repeating: 0, count: raw)
        #expect(frame.withUnsafeBytes { f in area.withUnsafeMutableBytes { ZstdDecompressor().decompress(f, into: $0, dictionary: dictionary) } })
        #expect(area.suffix(Self.texts[0].utf8.count) == ArraySlice(Self.texts[0].utf8))
        #expect(frame.withUnsafeBytes { f in area.withUnsafeMutableBytes { ZstdDecompressor().decompress(f, into: $0) } } == false,
                "without its dictionary the frame does not decode")
        // §3.1: block 2, encrypted with key 7, then zstd with dictionary 1.
        o += 40 + stored
        #expect(bytes[o + 4] == 1 && bytes[o + 5] == 1)
        #expect(u32(bytes, o + 16) == 1 && u32(bytes, o + 28) == 1)
        stored = Int(u32(bytes, o + 20))
        raw = Int(u32(bytes, o + 24))
        #expect(o + 40 + stored == bytes.count)
        #expect(u32(bytes, o + 32) == CRC32C.checksum(Array(bytes[o + 40..<o + 40 + stored])))
        let payload = Array(bytes[o + 40..<o + 40 + stored])
        #expect(u32(payload, 0) == 7)
        #expect(Array(payload[4..<16]) == Self.nonce)
        let aad = Array(bytes[o..<o + 20]) + Array(bytes[o + 24..<o + 32]) + Self.logID.bytes
        #expect(aad.count == 44)
        let box = try ChaChaPoly.SealedBox(nonce: ChaChaPoly.Nonce(data: payload[4..<16]),
                                           ciphertext: payload[16..<stored - 16], tag: payload[(stored - 16)...])
        let inner = Array(try ChaChaPoly.open(box, using: SymmetricKey(data: Self.key), authenticating: aad))
        area = [UInt8](repeating: 0, count: raw)
        #expect(inner.withUnsafeBytes { f in area.withUnsafeMutableBytes { ZstdDecompressor().decompress(f, into: $0, dictionary: dictionary) } })
        #expect(area.suffix(Self.texts[1].utf8.count) == ArraySlice(Self.texts[1].utf8))
    }

    @Test func goldenCodecLogReadsThroughTheLibrary() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        try FileManager.default.createDirectory(atPath: dir.file("dictionaries"), withIntermediateDirectories: true)
        copyItem(Self.goldenDirectory + "/00000000000000000000.seg", to: dir.file("00000000000000000000.seg"))
        copyItem(Self.goldenDirectory + "/dictionaries/0000000001.zdict", to: dir.file("dictionaries/0000000001.zdict"))
        var configuration = Configuration()
        configuration.encryption = .init(keys: [7: Self.key], current: nil)
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        let read = records(try log.readAll())
        #expect(read.map(\.seq) == [0, 1])
        #expect(read.map(\.timestamp) == [Self.timestamp, Self.timestamp + 1000])
        #expect(read.map { String(decoding: $0.payload, as: UTF8.self) } == Self.texts)
        try log.close()
    }
}
