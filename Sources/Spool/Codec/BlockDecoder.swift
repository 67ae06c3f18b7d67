/// Turns a verified stored payload back into records: decrypts (if encrypted), decompresses
/// (with the block's dictionary, if any) into a reusable buffer, checks every record's framing,
/// then hands the records out one at a time (``next()``), so a block costs its raw bytes in
/// memory whatever its record count. Owns a reusable decompression context and buffer; the
/// decoded block stays until the next `decode` or ``discard()``. Not thread-safe: one reader owns it.
///
/// A block it cannot read for want of a dictionary or a key throws (`.missingDictionary`,
/// `.missingKey`): that is the environment, not damage, and the reader stays on the block so a
/// retry with the file or key restored goes on. Anything else is corruption, returned with why.
final class BlockDecoder {
    enum Outcome {
        /// The block's records are ready for ``next()``.
        case valid
        case corrupt(String)
    }

    private let codec: LogCodec
    private let decompressor = ZstdDecompressor()
    /// The decoded records area (its first `length` bytes) of the block `walk` reads.
    private var raw: [UInt8] = []
    private var length = 0
    private var walk: RecordsWalk?
    /// `walk` as it was before the last ``next()``: a seek back to the record just returned
    /// (a consumer's batch that stops at `maxBytes` puts its last record back) restores it
    /// instead of walking again from the block's first record.
    private var beforeLast: RecordsWalk?
    /// Records the seeks have stepped over, for tests: seeking one record back must not cost a
    /// walk from the block's start (that made reading a block in small batches quadratic).
    private(set) var recordsPassedOver = 0
    /// A compact block's zstd frame with its magic number put back.
    private var framed: [UInt8] = []
    /// The last dictionary used, kept to skip the store's lock for the next block.
    private var dictionary: ZstdDictionary?

    init(codec: LogCodec) { self.codec = codec }

    /// Decodes `payload` (the stored payload of a block with `header`, checksum verified).
    /// `timestampBase` comes from `SegmentReader.timestampBase(for:)`; `location` names the
    /// segment and offset in errors and notices.
    func decode(_ header: BlockHeader, payload: ArraySlice<UInt8>, timestampBase: Int64, location: @autoclosure () -> String) throws -> Outcome {
        walk = nil
        beforeLast = nil
        let outcome = try areaOf(header, payload: payload, location: location)
        if case .valid = outcome {
            guard raw.withUnsafeBytes({ RecordsWalk.check(UnsafeRawBufferPointer(rebasing: $0[0..<length]), header: header) }) else {
                return .corrupt("\(location()): the block's records do not decode")
            }
            walk = RecordsWalk(header: header, timestampBase: timestampBase)
        }
        return outcome
    }

    /// The header of the decoded block, if one is held.
    var header: BlockHeader? { walk?.header }

    /// The decoded block's next record, or nil past its last.
    func next() -> Record? {
        beforeLast = walk
        return raw.withUnsafeBytes { walk?.next(in: UnsafeRawBufferPointer(rebasing: $0[0..<length])) }
    }

    /// Moves to `seq` in the decoded block without copying the records passed over. Back to the
    /// record ``next()`` just returned costs O(1); further back walks again from the block's start.
    func seek(to seq: UInt64) {
        guard walk != nil else { return }
        if seq < walk!.nextSeq {
            if let beforeLast, beforeLast.nextSeq <= seq { walk = beforeLast } else { walk!.rewind() }
        }
        let from = walk!.nextSeq
        raw.withUnsafeBytes { walk!.skip(to: seq, in: UnsafeRawBufferPointer(rebasing: $0[0..<length])) }
        recordsPassedOver += Int(walk!.nextSeq - from)
    }

    /// Forgets the decoded block.
    func discard() {
        walk = nil
        beforeLast = nil
    }

    /// Decrypts and decompresses `payload` into `raw[0..<length]`.
    private func areaOf(_ header: BlockHeader, payload: ArraySlice<UInt8>, location: () -> String) throws -> Outcome {
        guard header.isEncrypted else { return try payload.withUnsafeBytes { try decompress(header, stored: $0, location: location) } }
        let opened = try payload.withUnsafeBytes {
            try BlockCipher.open($0, header: header, logID: codec.logID, keys: codec.keys, location: location())
        }
        switch opened {
        case .plaintext(let plaintext):
            return try plaintext.withUnsafeBytes { try decompress(header, stored: $0, location: location) }
        case .authenticationFailed(let keyID):
            return .corrupt("\(location()): the encrypted payload failed authentication with key \(keyID) (the block was altered)")
        }
    }

    private func decompress(_ header: BlockHeader, stored: UnsafeRawBufferPointer, location: () -> String) throws -> Outcome {
        let failure = Outcome.corrupt("\(location()): the block's records do not decode")
        length = Int(header.rawLength)
        if raw.count < length { raw = [UInt8](repeating: 0, count: length) }
        if header.codec == Format.codecNone {
            guard stored.count == length else { return failure }
            raw.withUnsafeMutableBytes { $0.copyMemory(from: stored) }
            return .valid
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
        let length = self.length
        func decompress(_ frame: UnsafeRawBufferPointer) -> Bool {
            raw.withUnsafeMutableBytes { destination in
                decompressor.decompress(frame, into: UnsafeMutableRawBufferPointer(rebasing: destination[0..<length]), dictionary: dictionary)
            }
        }
        if header.form == .compact {
            framed.removeAll(keepingCapacity: true)
            framed.append(contentsOf: Format.zstdFrameMagic)
            framed.append(contentsOf: stored)
            guard framed.withUnsafeBytes({ decompress($0) }) else { return failure }
        } else {
            guard decompress(stored) else { return failure }
        }
        return .valid
    }
}
