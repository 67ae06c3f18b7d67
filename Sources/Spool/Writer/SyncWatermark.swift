/// The synced watermark, `SYNCED` (FORMAT.md §6, "The synced watermark"): a seq below which
/// every record was durable when the value was written. It is laid out as a consumer offset
/// file (§5: two checksummed slots written alternately), so a torn write leaves the previous
/// value.
///
/// The writer rewrites it after each `fdatasync` of the active segment, without syncing it: a
/// value is written only once what it covers is durable, so whichever value a power cut
/// leaves is true, however late the page cache writes it back; a cut can only leave an
/// older, lower one. Recovery uses it to tell a hole a power cut left in records never synced
/// (past it) from corruption (below it); it never decides what is cut, so a value that lags
/// (a sidecar's syncs do not move it) or is forged only changes how lost records are reported.
/// Not thread-safe: the segment writer owns it.
final class SyncWatermark {
    private let path: String
    private var file: OffsetFile?

    /// The watermark of the log in `directory`, or nil when it has no `SYNCED` file or neither
    /// slot of it is valid (a log written before the watermark existed, or damage): recovery
    /// then takes all damage followed by a valid block for corruption.
    /// - Throws: `.io` when the file is there but cannot be read (a symbolic link included).
    static func read(directory: String) throws -> UInt64? {
        let path = directory + "/" + Format.watermarkFileName
        guard DirectoryIO.exists(path) else { return nil }
        return try OffsetFile.read(path)?.nextSeq
    }

    /// Opens the watermark of the log in `directory` and sets it to `syncedThrough`: opening
    /// has just made every record below it durable, and none at or past it exists yet. A
    /// missing or unreadable file is created whole, durably (temporary file, `fdatasync`,
    /// rename, directory `fsync`), so that its presence survives a power loss. A value above
    /// `syncedThrough` (recovery cut damaged records below it, whose seqs go to new records)
    /// is lowered durably: those new records are not synced yet.
    /// - Throws: `.io` when the file cannot be created, opened or written.
    init(directory: String, syncedThrough: UInt64, permissions: UInt16) throws {
        path = directory + "/" + Format.watermarkFileName
        if DirectoryIO.exists(path), let slot = try OffsetFile.read(path) {
            let file = try OffsetFile(path: path, slot: slot)
            self.file = file
            if syncedThrough != slot.nextSeq { try file.commit(syncedThrough, durable: syncedThrough < slot.nextSeq) }
        } else {
            try OffsetFile.create(path, directory: directory, nextSeq: syncedThrough, permissions: permissions)
            file = try OffsetFile(path: path, slot: OffsetSlot(generation: 1, nextSeq: syncedThrough))
        }
    }

    /// Records that every seq below `seq` is durable: one `pwrite` of a slot, no sync. A failed
    /// write is ignored: the watermark then stays lower, as a power cut may leave it anyway.
    func advance(to seq: UInt64) {
        guard let file, seq > file.nextSeq else { return }
        try? file.commit(seq, durable: false)
    }

    /// Closes the file (``reopen()`` opens it again).
    func close() {
        file?.close()
        file = nil
    }

    /// Opens the file again after ``close()``, at its last valid slot.
    /// - Throws: `.io` when it cannot be opened, or `.corrupt` when no slot is valid.
    func reopen() throws {
        guard file == nil else { return }
        guard let slot = try OffsetFile.read(path) else {
            throw SpoolError(.corrupt, "the synced watermark has no valid slot", path: path)
        }
        file = try OffsetFile(path: path, slot: slot)
    }
}
