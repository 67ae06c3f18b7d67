/// A consumer's committed offset on disk: two checksummed 32-byte slots (at offsets 0 and 512)
/// written alternately; the valid slot with the highest generation wins.
///
/// A torn write can damage only the slot being written, so the other still holds the previous
/// commit: after any crash the offset is the old value or the new one, never a mix or garbage.
/// In `.durable` mode each commit is one `pwrite` and one `fdatasync` (no rename, no directory
/// fsync). In `.fast` mode the `fdatasync` is skipped: a power loss can only roll the offset
/// back to an earlier commit (re-delivery), never forward. Not thread-safe: the consumer's lock guards it.
final class OffsetFile {
    let path: String
    private let file: FileIO
    private(set) var generation: UInt64
    private(set) var nextSeq: UInt64

    /// Reads the offset file at `path`. Returns nil when neither slot is valid.
    static func read(_ path: String) throws -> OffsetSlot? {
        let file = try FileIO.open(path, .readOnly)
        defer { file.close() }
        let bytes = try file.read(count: Format.offsetFileSize, at: 0)
        return bytes.withUnsafeBytes { raw -> OffsetSlot? in
            var best: OffsetSlot?
            for start in [0, Format.offsetSlotStride] where raw.count >= start + Format.offsetSlotSize {
                if let slot = OffsetSlot.parse(UnsafeRawBufferPointer(rebasing: raw[start..<start + Format.offsetSlotSize])),
                   slot.generation >= (best?.generation ?? 0) {
                    best = slot
                }
            }
            return best
        }
    }

    /// Creates a new offset file holding `nextSeq`, durably (temporary file, fsync, rename, directory fsync).
    static func create(_ path: String, directory: String, nextSeq: UInt64, permissions: UInt16) throws {
        var bytes = [UInt8](repeating: 0, count: Format.offsetFileSize)
        let slot = OffsetSlot(generation: 1, nextSeq: nextSeq).encoded()
        bytes.replaceSubrange(0..<slot.count, with: slot)
        try DirectoryIO.writeAtomically(bytes, to: path, directory: directory, permissions: permissions)
    }

    init(path: String, slot: OffsetSlot) throws {
        self.path = path
        self.file = try FileIO.open(path, .readWrite)
        self.generation = slot.generation
        self.nextSeq = slot.nextSeq
    }

    deinit { close() }

    private var closed = false

    /// Closes the file, once (the committer's close, or the last reference's end); the
    /// committer's lock keeps commits from using it after.
    func close() {
        guard !closed else { return }
        closed = true
        file.close()
    }

    /// Writes `nextSeq` into the older slot; with `durable`, `fdatasync`s it before returning.
    func commit(_ nextSeq: UInt64, durable: Bool) throws {
        let generation = self.generation + 1
        let slotOffset = Int64((generation % 2 == 0) ? Format.offsetSlotStride : 0)
        try file.write(OffsetSlot(generation: generation, nextSeq: nextSeq).encoded(), at: slotOffset)
        if durable { try file.syncData() }
        self.generation = generation
        self.nextSeq = nextSeq
    }
}
