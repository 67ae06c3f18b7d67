import Crypto
import Foundation

/// Encryption of block payloads with ChaCha20-Poly1305 (FORMAT.md §3.1).
///
/// The stored payload of an encrypted block is `key id u32 | nonce [12] | ciphertext | tag [16]`,
/// where the ciphertext is the codec's payload (a zstd frame or the records area) and the
/// associated data binds the block to its place: header bytes 0..<20 (magic, codec, flags,
/// reserved, first seq, record count), header bytes 24..<32 (raw length, dictionary id) and the
/// log id. The payload CRC covers the stored (encrypted) payload, so checks need no key.
enum BlockCipher {
    /// The 44 bytes of associated data for a block with `header` in log `logID`. They come
    /// from the full (40-byte) encoding of the header's fields whichever form the block uses,
    /// so the first seq is absolute in both.
    static func associatedData(_ header: BlockHeader, logID: LogID) -> [UInt8] {
        var encoded = [UInt8](repeating: 0, count: Format.blockHeaderSize)
        var full = header
        full.form = .full
        full.store(into: &encoded, at: 0)
        var data = Array(encoded[0..<20])
        data.append(contentsOf: encoded[24..<32])
        logID.append(to: &data)
        return data
    }

    /// What opening an encrypted payload gave.
    enum Opened {
        case plaintext([UInt8])
        /// The tag did not verify under key `keyID`: the block was altered or the key is wrong.
        case authenticationFailed(keyID: UInt32)
    }

    /// Decrypts the verified stored payload of an encrypted block.
    /// - Throws: `.missingKey` naming the key id when `keys` lacks it.
    static func open(_ payload: UnsafeRawBufferPointer, header: BlockHeader, logID: LogID,
                     keys: [UInt32: SymmetricKey], location: String) throws -> Opened {
        let keyID = loadLE(payload, 0, as: UInt32.self)
        guard let key = keys[keyID] else {
            let supplied = keys.isEmpty ? "no keys were supplied" : "the keys supplied are \(keys.keys.sorted())"
            throw SpoolError(.missingKey, "\(location): the block holding records \(header.firstSeq)..<\(header.endSeq) is encrypted with key \(keyID); \(supplied) (Configuration.encryption, or --key-file)")
        }
        let tagStart = payload.count - Format.tagSize
        do {
            let box = try ChaChaPoly.SealedBox(
                nonce: ChaChaPoly.Nonce(data: UnsafeRawBufferPointer(rebasing: payload[4..<4 + Format.nonceSize])),
                ciphertext: UnsafeRawBufferPointer(rebasing: payload[4 + Format.nonceSize..<tagStart]),
                tag: UnsafeRawBufferPointer(rebasing: payload[tagStart...]))
            let plaintext = try ChaChaPoly.open(box, using: key, authenticating: associatedData(header, logID: logID))
            return .plaintext(Array(plaintext))
        } catch {
            return .authenticationFailed(keyID: keyID)
        }
    }
}

/// Encrypts the payloads of new blocks with one key. Not thread-safe: the writer thread's encoder.
struct BlockSealer {
    let keyID: UInt32
    let key: SymmetricKey
    let logID: LogID
    /// Makes each block's nonce: 12 random bytes. A test seam (golden files use a fixed one).
    var makeNonce: () -> ChaChaPoly.Nonce = { ChaChaPoly.Nonce() }

    /// Replaces `out[payloadFrom...]` (the codec's payload) with its encrypted form for a block
    /// with `header` (whose codec, seqs, raw length and dictionary id are final).
    func seal(_ out: inout [UInt8], payloadFrom start: Int, header: BlockHeader) throws {
        let box = try ChaChaPoly.seal(out[start...], using: key, nonce: makeNonce(),
                                      authenticating: BlockCipher.associatedData(header, logID: logID))
        out.removeSubrange(start...)
        out.appendLE(keyID)
        out.append(contentsOf: box.nonce)
        out.append(contentsOf: box.ciphertext)
        out.append(contentsOf: box.tag)
    }
}

/// Key check files, `keys/<id>.check` (FORMAT.md §9): they let opening tell a wrong key from a
/// tampered block. Blocking file I/O: called at open.
enum KeyCheck {
    /// HMAC-SHA256 under `key` of "spool key check", the key id and the log id.
    static func code(key: SymmetricKey, keyID: UInt32, logID: LogID) -> [UInt8] {
        var message = Array("spool key check".utf8)
        message.appendLE(keyID)
        logID.append(to: &message)
        return Array(HMAC<SHA256>.authenticationCode(for: message, using: key))
    }

    static func encoded(keyID: UInt32, code: [UInt8]) -> [UInt8] {
        var bytes = Format.keyCheckMagic
        bytes.appendLE(Format.keyCheckVersion)
        bytes.appendLE(UInt16(0))
        bytes.appendLE(keyID)
        bytes.append(contentsOf: code)
        bytes.appendLE(UInt32(0))
        bytes.appendLE(CRC32C.checksum(bytes))
        return bytes
    }

    /// The check code stored in a key check file, or nil if the file is not a valid one for `keyID`.
    static func parse(_ bytes: [UInt8], keyID: UInt32) -> [UInt8]? {
        guard bytes.count == Format.keyCheckSize, Array(bytes[0..<8]) == Format.keyCheckMagic else { return nil }
        let valid = bytes.withUnsafeBytes { raw in
            loadLE(raw, 52, as: UInt32.self) == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[0..<52]))
                && loadLE(raw, 8, as: UInt16.self) == Format.keyCheckVersion && loadLE(raw, 12, as: UInt32.self) == keyID
        }
        return valid ? Array(bytes[16..<48]) : nil
    }

    /// Checks every supplied key against its check file, and writes the check file of the
    /// current key if it has none.
    /// - Throws: `.authenticationFailed` naming the key id whose check file holds another key's code.
    static func verify(_ encryption: Configuration.Encryption, logID: LogID, directory: String, configuration: Configuration) throws {
        let keysDirectory = directory + "/" + Format.keysDirectory
        for (id, bytes) in encryption.keys.sorted(by: { $0.key < $1.key }) {
            let path = keysDirectory + "/" + Format.keyCheckName(id)
            let expected = code(key: SymmetricKey(data: bytes), keyID: id, logID: logID)
            if DirectoryIO.exists(path) {
                let file = try FileIO.open(path, .readOnly)
                let stored = try file.read(count: Format.keyCheckSize + 1, at: 0)
                file.close()
                if let storedCode = parse(stored, keyID: id) {
                    guard storedCode == expected else {
                        throw SpoolError(.authenticationFailed, "key \(id) is not the key that encrypted this log's blocks with id \(id) (its check in \(Format.keysDirectory)/\(Format.keyCheckName(id)) does not match)", path: path)
                    }
                    continue
                }
                // A damaged check file proves nothing; it is rewritten below for the current key.
            }
            if id == encryption.current {
                try DirectoryIO.create(keysDirectory, permissions: configuration.directoryMode, insideLog: true)
                try DirectoryIO.writeAtomically(encoded(keyID: id, code: expected), to: path, directory: keysDirectory, permissions: configuration.fileMode)
            }
        }
    }
}
