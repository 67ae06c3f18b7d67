import Foundation
@testable import Spool

/// A simulated power loss: rewinds the files under a tracked directory to what the sync
/// tracker (``FaultInjection/trackSyncs(under:)``) recorded as durable.
///
/// - A file's bytes past its last `fdatasync` are dropped (or, with `partial`, a random prefix
///   of them survives, as ext4's ordered mode allows). A small file (an offset file, META)
///   gets back its bytes at its last sync, or with `partial` may keep its newer ones.
/// - A directory entry that no `fsync` of its directory made durable disappears, and an entry
///   renamed over since then points at its older file again when that file's bytes are known.
struct PowerLoss {
    var state: FaultInjection.DurableState
    var partial: Bool
    var generator: SeededGenerator

    /// Captures what is durable under `directory` now.
    static func capture(_ directory: String, partial: Bool = false, seed: UInt64 = 0) -> PowerLoss {
        PowerLoss(state: FaultInjection.durableState(under: directory)!, partial: partial, generator: SeededGenerator(seed: seed))
    }

    /// Rewinds `directory` (whose log must be closed, and tracking stopped).
    mutating func apply(to directory: String) throws {
        let fm = FileManager.default
        let durable = state.directories[directory] ?? [:]
        let current = try fm.contentsOfDirectory(atPath: directory)
        for name in current {
            let path = directory + "/" + name
            var info = stat()
            guard lstat(path, &info) == 0 else { continue }
            let inode = UInt64(info.st_ino)
            let isDirectory = (info.st_mode & S_IFMT) == S_IFDIR
            if durable[name] == inode {
                if isDirectory {
                    try apply(to: path)
                } else {
                    try rewind(path, to: state.files[inode], currentSize: Int64(info.st_size))
                }
            } else if let older = durable[name], let bytes = state.files[older]?.bytes {
                try fm.removeItem(atPath: path)
                writeFile(path, bytes)
            } else {
                try fm.removeItem(atPath: path)
            }
        }
        for (name, inode) in durable where !current.contains(name) {
            if let bytes = state.files[inode]?.bytes { writeFile(directory + "/" + name, bytes) }
        }
    }

    private mutating func rewind(_ path: String, to synced: FaultInjection.DurableState.File?, currentSize: Int64) throws {
        if let bytes = synced?.bytes {
            if partial, Bool.random(using: &generator) { return }
            writeFile(path, bytes)
            return
        }
        let syncedSize = min(synced?.size ?? 0, currentSize)
        let cut = partial ? Int64.random(in: syncedSize...currentSize, using: &generator) : syncedSize
        guard truncate(path, off_t(cut)) == 0 else { throw SpoolError(.io, "truncate failed", path: path) }
    }
}

/// Cuts the power under `dir` now: captures what is durable, closes `log` (whatever closing
/// writes is lost with the rest), stops tracking and rewinds the files.
func cutPower(closing log: EventLog, in dir: TemporaryDirectory, partial: Bool = false, seed: UInt64 = 0) throws {
    var loss = PowerLoss.capture(dir.path, partial: partial, seed: seed)
    try log.close()
    FaultInjection.stopTracking(under: dir.path)
    try loss.apply(to: dir.path)
}
