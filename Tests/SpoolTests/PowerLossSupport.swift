import Foundation
@testable import Spool

/// A simulated power loss: rewinds the files under a tracked directory to what the sync
/// tracker (``FaultInjection/trackSyncs(under:)``) recorded as durable.
///
/// - What became of the bytes written since a file's last `fdatasync` depends on ``Unsynced``.
/// - A directory entry that no `fsync` of its directory made durable disappears, and an entry
///   renamed over since then points at its older file again when that file's bytes are known.
struct PowerLoss {
    /// What a power cut keeps of what was written but not synced.
    enum Unsynced {
        /// Nothing: every file is cut back to its size at its last sync; a small file (an
        /// offset file, META) gets back its bytes then.
        case dropped
        /// A random prefix of what was appended since (as ext4's ordered mode allows); a small
        /// file may keep its newer bytes.
        case prefixKept
        /// A random subset of the 4 KiB pages that changed since, in any order (a disk and a
        /// page cache write dirty pages back as they please): a later page may survive and an
        /// earlier one not. A page not kept holds its bytes at the last sync, or zeros past the
        /// size synced then. Needs every file's bytes: track with `trackSyncs(under:wholeFiles: true)`.
        case pagesKept
    }

    /// The size of a page the page cache writes back whole or not at all.
    static let pageSize = 4096

    var state: FaultInjection.DurableState
    var unsynced: Unsynced
    var generator: SeededGenerator

    /// Captures what is durable under `directory` now.
    static func capture(_ directory: String, unsynced: Unsynced = .dropped, seed: UInt64 = 0) -> PowerLoss {
        let state = FaultInjection.durableState(under: directory)!
        precondition(unsynced != .pagesKept || state.recordsWholeFiles, "a page-by-page power loss needs every file's synced bytes")
        return PowerLoss(state: state, unsynced: unsynced, generator: SeededGenerator(seed: seed))
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
        if unsynced == .pagesKept {
            writeFile(path, keepingRandomPages(of: readFile(path), over: synced?.bytes ?? []))
            return
        }
        if let bytes = synced?.bytes {
            if unsynced == .prefixKept, Bool.random(using: &generator) { return }
            writeFile(path, bytes)
            return
        }
        let syncedSize = min(synced?.size ?? 0, currentSize)
        let cut = unsynced == .prefixKept ? Int64.random(in: syncedSize...currentSize, using: &generator) : syncedSize
        guard truncate(path, off_t(cut)) == 0 else { throw SpoolError(.io, "truncate failed", path: path) }
    }

    /// What the disk holds after the cut: each page that differs between `current` and
    /// `synced` is the current one or the synced one (zeros past the synced size), at random.
    /// The file is as long as the synced one, or up to the last current page kept past it.
    /// (A file cut shorter since its sync, as closing cuts preallocated zeros, is taken as
    /// the synced one with its end zeroed, then kept or not page by page.)
    private mutating func keepingRandomPages(of current: [UInt8], over synced: [UInt8]) -> [UInt8] {
        var result = synced
        let length = max(current.count, synced.count)
        var page = 0
        while page < length {
            let end = min(page + Self.pageSize, length)
            let new = (page..<end).map { $0 < current.count ? current[$0] : 0 }
            let old = (page..<end).map { $0 < synced.count ? synced[$0] : 0 }
            if new != old, Bool.random(using: &generator) {
                if result.count < end { result += [UInt8](repeating: 0, count: end - result.count) }
                result.replaceSubrange(page..<end, with: new)
            }
            page = end
        }
        return result
    }
}

/// Cuts the power under `dir` now: captures what is durable, closes `log` (whatever closing
/// writes is lost with the rest), stops tracking and rewinds the files.
func cutPower(closing log: EventLog, in dir: TemporaryDirectory, unsynced: PowerLoss.Unsynced = .dropped, seed: UInt64 = 0) throws {
    var loss = PowerLoss.capture(dir.path, unsynced: unsynced, seed: seed)
    try log.close()
    FaultInjection.stopTracking(under: dir.path)
    try loss.apply(to: dir.path)
}
