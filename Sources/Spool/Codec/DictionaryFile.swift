/// The file of one dictionary, `dictionaries/<id>.zdict` (FORMAT.md §8): a 32-byte header, then
/// the dictionary bytes. Written once, atomically, before any block names its id.
enum DictionaryFile {
    static func encoded(id: UInt32, bytes: [UInt8]) -> [UInt8] {
        var out = Format.dictionaryMagic
        out.appendLE(Format.dictionaryVersion)
        out.appendLE(UInt16(Format.dictionaryHeaderSize))
        out.appendLE(id)
        out.appendLE(UInt32(bytes.count))
        out.appendLE(CRC32C.checksum(bytes))
        out.appendLE(UInt32(0))
        out.appendLE(CRC32C.checksum(out))
        out.append(contentsOf: bytes)
        return out
    }

    /// The dictionary bytes of a file's content, or why it is not a valid file for `id`.
    static func parse(_ file: [UInt8], id: UInt32) -> Result<[UInt8], SpoolError> {
        func invalid(_ why: String) -> Result<[UInt8], SpoolError> {
            .failure(SpoolError(.missingDictionary, "dictionary \(id) is damaged: \(why)"))
        }
        guard file.count >= Format.dictionaryHeaderSize, Array(file[0..<8]) == Format.dictionaryMagic else { return invalid("bad magic") }
        return file.withUnsafeBytes { raw in
            guard loadLE(raw, 28, as: UInt32.self) == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[0..<28])) else {
                return invalid("header checksum mismatch")
            }
            let version = loadLE(raw, 8, as: UInt16.self)
            guard version == Format.dictionaryVersion else {
                return .failure(SpoolError(.unsupportedVersion, "dictionary \(id) has format version \(version); this reader knows \(Format.dictionaryVersion)"))
            }
            guard loadLE(raw, 10, as: UInt16.self) == UInt16(Format.dictionaryHeaderSize), loadLE(raw, 12, as: UInt32.self) == id else {
                return invalid("the header does not match the file name")
            }
            let length = Int(loadLE(raw, 16, as: UInt32.self))
            guard length <= Format.maxDictionarySize, file.count == Format.dictionaryHeaderSize + length else {
                return invalid("length \(length) does not match the file's size \(file.count)")
            }
            let bytes = Array(file[Format.dictionaryHeaderSize...])
            guard CRC32C.checksum(bytes) == loadLE(raw, 20, as: UInt32.self) else { return invalid("checksum mismatch") }
            return .success(bytes)
        }
    }
}
