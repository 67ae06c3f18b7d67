/// Turns a verified stored payload back into records: decrypts (if encrypted), decompresses
/// (with the block's dictionary, if any), parses. Owns a reusable decompression context and
/// buffer. Not thread-safe: one reader owns it.
///
/// A block it cannot read for want of a dictionary or a key throws (`.missingDictionary`,
/// `.missingKey`): that is the environment, not damage, and the reader stays on the block so a
/// retry with the file or key restored goes on. Anything else is corruption, returned with why.
final class BlockDecoder {
    enum Outcome {
        case records([Record])
        case corrupt(String)
    }

    private let codec: LogCodec
    private let decompressor = ZstdDecompressor()
    private var raw: [UInt8] = []
    /// A compact block's zstd frame with its magic number put back.
    private var framed: [UInt8] = []
    /// The last dictionary used, kept to skip the store's lock for the next block.
    private var dictionary: ZstdDictionary?

    init(codec: LogCodec) { self.codec = codec }

    /// Decodes `payload` (the stored payload of a block with `header`, checksum verified).
    /// `timestampBase` comes from `SegmentReader.timestampBase(for:)`; `location` names the
    /// segment and offset in errors and notices.
    func decode(_ header: BlockHeader, payload: [UInt8], timestampBase: Int64, location: @autoclosure () -> String) throws -> Outcome {
        guard header.isEncrypted else { return try decode(header, stored: payload, timestampBase: timestampBase, location: location) }
        let opened = try payload.withUnsafeBytes {
            try BlockCipher.open($0, header: header, logID: codec.logID, keys: codec.keys, location: location())
        }
        switch opened {
        case .plaintext(let plaintext):
            return try decode(header, stored: plaintext, timestampBase: timestampBase, location: location)
        case .authenticationFailed(let keyID):
            return .corrupt("\(location()): the encrypted payload failed authentication with key \(keyID) (the block was altered)")
        }
    }

    private func decode(_ header: BlockHeader, stored: [UInt8], timestampBase: Int64, location: () -> String) throws -> Outcome {
        let failure = Outcome.corrupt("\(location()): the block's records do not decode")
        if header.codec == Format.codecNone {
            guard stored.count == Int(header.rawLength) else { return failure }
            return stored.withUnsafeBytes { decodeRecords($0, header: header, timestampBase: timestampBase) }.map(Outcome.records) ?? failure
        }
        var dictionary: ZstdDictionary?
        if header.dictionaryID != 0 {
            if self.dictionary?.id != header.dictionaryID {
                do {
                    self.dictionary = try codec.dictionaries.dictionary(header.dictionaryID)
                } catch var error as SpoolError where error.code == .missingDictionary {
                    error.message = "\(location()): \(error.message)"
                    throw error
                }
            }
            dictionary = self.dictionary
        }
        let length = Int(header.rawLength)
        if raw.count < length { raw = [UInt8](repeating: 0, count: length) }
        func decompress(_ frame: [UInt8]) -> Bool {
            frame.withUnsafeBytes { source in
                raw.withUnsafeMutableBytes { destination in
                    decompressor.decompress(source, into: UnsafeMutableRawBufferPointer(rebasing: destination[0..<length]), dictionary: dictionary)
                }
            }
        }
        if header.form == .compact {
            framed.removeAll(keepingCapacity: true)
            framed.append(contentsOf: Format.zstdFrameMagic)
            framed.append(contentsOf: stored)
            guard decompress(framed) else { return failure }
        } else {
            guard decompress(stored) else { return failure }
        }
        return raw.withUnsafeBytes { decodeRecords(UnsafeRawBufferPointer(rebasing: $0[0..<length]), header: header, timestampBase: timestampBase) }
            .map(Outcome.records) ?? failure
    }
}
