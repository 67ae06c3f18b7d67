import Synchronization

/// A log's zstd dictionaries: the files in `dictionaries/`, each digested once and shared by the
/// writer and every reader; which one new blocks use; and which ones blocks still use, so a
/// file is deleted only when no stored block names it.
///
/// Thread-safety: every method may be called from any thread (state behind one `Mutex`; file
/// I/O outside it). Blocking file I/O: not for the cooperative pool.
final class DictionaryStore: Sendable {
    /// The log's directory and its `dictionaries/` subdirectory.
    let directory: String
    let path: String
    private let level: Int32
    private let fileMode: UInt16
    private let directoryMode: UInt16
    /// Segments with a base at or below this were written (at least in part) by an earlier
    /// process: which dictionaries they use is read from their block headers when needed.
    private let inheritedThrough: UInt64?

    private struct State {
        var loaded: [UInt32: ZstdDictionary] = [:]
        var onDisk: Set<UInt32> = []
        var highest: UInt32 = 0
        /// The dictionary new blocks are compressed with.
        var current: UInt32?
        /// The dictionary the writer's encoder holds (it may still be the previous `current`).
        var writerHolds: UInt32?
        /// Ids being written to disk: allocated, not yet usable.
        var pending: Set<UInt32> = []
        /// Dictionary ids each segment's blocks use, by segment base (noted by the writer, or scanned).
        var used: [UInt64: Set<UInt32>] = [:]
        var scanned: Set<UInt64> = []

        var protected: Set<UInt32> { pending.union([current, writerHolds].compactMap { $0 }) }
    }
    private let state = RankedMutex(.dictionaries, State())

    /// Lists the dictionary files (removing leftovers of interrupted writes).
    /// - Parameter repairing: remove temporary files an interrupted store left (a snapshot does not).
    init(directory: String, configuration: Configuration, inheritedThrough: UInt64?, repairing: Bool = true) throws {
        self.directory = directory
        path = directory + "/" + Format.dictionariesDirectory
        level = configuration.compressionLevel
        fileMode = configuration.fileMode
        directoryMode = configuration.directoryMode
        self.inheritedThrough = inheritedThrough
        var ids = Set<UInt32>()
        if DirectoryIO.exists(path) {
            for name in try DirectoryIO.list(path) {
                if let id = Format.dictionaryID(ofFileNamed: name) {
                    ids.insert(id)
                } else if repairing && name.hasSuffix(Format.temporarySuffix) {
                    try DirectoryIO.remove(path + "/" + name)
                }
            }
        }
        state.withLock {
            $0.onDisk = ids
            $0.highest = ids.max() ?? 0
        }
    }

    /// The newest dictionary on disk, if any.
    var newestID: UInt32? { state.withLock { $0.onDisk.max() } }
    /// The dictionary new blocks are compressed with, if any.
    var currentID: UInt32? { state.withLock { $0.current } }
    /// The ids of the dictionary files, sorted.
    var storedIDs: [UInt32] { state.withLock { $0.onDisk.sorted() } }

    /// Dictionary `id`, loaded and digested on first use.
    /// - Throws: `.missingDictionary` naming the id and the file when it is absent or damaged.
    func dictionary(_ id: UInt32) throws -> ZstdDictionary {
        if let loaded = state.withLock({ $0.loaded[id] }) { return loaded }
        let file = path + "/" + Format.dictionaryName(id)
        guard DirectoryIO.exists(file) else {
            throw SpoolError(.missingDictionary, "blocks are compressed with dictionary \(id), but \(Format.dictionariesDirectory)/\(Format.dictionaryName(id)) does not exist", path: file)
        }
        let reader = try FileIO.open(file, .readOnly)
        defer { reader.close() }
        let content = try reader.read(count: Format.dictionaryHeaderSize + Format.maxDictionarySize + 1, at: 0)
        var bytes: [UInt8]
        switch DictionaryFile.parse(content, id: id) {
        case .success(let parsed): bytes = parsed
        case .failure(var error):
            error.path = file
            throw error
        }
        let dictionary = try ZstdDictionary(id: id, bytes: bytes, level: level)
        bytes = []
        return state.withLock { s in
            if let raced = s.loaded[id] { return raced }
            s.loaded[id] = dictionary
            return dictionary
        }
    }

    /// The id of a stored dictionary whose bytes are `bytes`, if any (damaged files are skipped).
    func find(_ bytes: [UInt8]) -> UInt32? {
        for id in storedIDs.reversed() {
            if let stored = try? dictionary(id), stored.bytes == bytes { return id }
        }
        return nil
    }

    /// Stores `bytes` as a new dictionary (the next id), durably, and returns it digested.
    /// The file is written with temporary file, fsync, rename, directory fsync before the id is usable.
    func add(_ bytes: [UInt8]) throws -> ZstdDictionary {
        let id: UInt32 = try state.withLock {
            guard $0.highest < UInt32.max else { throw SpoolError(.invalidArgument, "dictionary ids are exhausted") }
            $0.highest += 1
            $0.pending.insert($0.highest)
            return $0.highest
        }
        do {
            let dictionary = try ZstdDictionary(id: id, bytes: bytes, level: level)
            if !DirectoryIO.exists(path) {
                try DirectoryIO.create(path, permissions: directoryMode, insideLog: true)
                try DirectoryIO.sync(directory)
            }
            try DirectoryIO.writeAtomically(DictionaryFile.encoded(id: id, bytes: bytes), to: path + "/" + Format.dictionaryName(id),
                                            directory: path, permissions: fileMode)
            state.withLock {
                $0.onDisk.insert(id)
                $0.loaded[id] = dictionary
                $0.pending.remove(id)
            }
            return dictionary
        } catch {
            _ = state.withLock { $0.pending.remove(id) }
            throw error
        }
    }

    /// Makes `id` (loaded) the dictionary new blocks use, or none.
    func setCurrent(_ id: UInt32?) throws {
        if let id { _ = try dictionary(id) }
        state.withLock { $0.current = id }
    }

    /// The dictionary for the writer's next blocks; from now on the writer holds it. Writer thread.
    func forWriter() -> ZstdDictionary? {
        state.withLock { s in
            s.writerHolds = s.current
            return s.current.flatMap { s.loaded[$0] }
        }
    }

    /// Records that a block of segment `base` is compressed with dictionary `id`. Writer thread,
    /// right after encoding the block (before it is written).
    func noteUse(_ id: UInt32, segment base: UInt64) {
        guard id != 0 else { return }
        state.withLock { _ = $0.used[base, default: []].insert(id) }
    }

    /// Records that segment `base` was rewritten without a dictionary (cold recompression):
    /// none of its blocks keeps one alive any more.
    func noteRewritten(segment base: UInt64) {
        state.withLock {
            $0.used[base] = nil
            $0.scanned.insert(base)
        }
    }

    /// Deletes every dictionary file no block of `segments()` (the segments that remain) uses,
    /// except the current one and those being written. Called after segments are deleted.
    ///
    /// Segments inherited from an earlier process are scanned once (block headers only); the
    /// writer notes the rest as it encodes. A segment whose headers cannot all be read counts as
    /// using every dictionary. `segments` is called after the protected ids are read, so a
    /// dictionary the writer stopped holding has all its blocks in a listed segment.
    /// - Returns: the ids deleted.
    @discardableResult
    func removeUnused(remaining segments: () -> [SegmentInfo]) throws -> [UInt32] {
        let candidates = state.withLock { $0.onDisk.subtracting($0.protected) }
        guard !candidates.isEmpty else { return [] }
        let remaining = segments()
        guard let oldest = remaining.first?.baseSeq else { return [] }
        let unscanned = state.withLock { s in
            remaining.filter { segment in inheritedThrough.map { segment.baseSeq <= $0 } == true && !s.scanned.contains(segment.baseSeq) }
        }
        for segment in unscanned {
            let ids = try dictionaryIDs(in: segment)
            state.withLock {
                $0.used[segment.baseSeq, default: []].formUnion(ids ?? $0.onDisk)
                $0.scanned.insert(segment.baseSeq)
            }
        }
        let doomed: [UInt32] = state.withLock { s in
            s.used = s.used.filter { $0.key >= oldest }  // segments below the oldest are gone
            let inUse = s.used.values.reduce(into: Set<UInt32>()) { $0.formUnion($1) }
            let doomed = candidates.subtracting(inUse).subtracting(s.protected).sorted()
            for id in doomed {
                s.onDisk.remove(id)
                s.loaded[id] = nil
            }
            return doomed
        }
        guard !doomed.isEmpty else { return [] }
        for id in doomed { try DirectoryIO.remove(path + "/" + Format.dictionaryName(id)) }
        try DirectoryIO.sync(path)
        return doomed
    }

    /// The dictionary ids named by the block headers of a segment, or nil if a header is damaged.
    private func dictionaryIDs(in segment: SegmentInfo) throws -> Set<UInt32>? {
        let reader: SegmentReader
        do {
            reader = try SegmentReader(path: directory + "/" + segment.name, baseSeq: segment.baseSeq, limit: segment.size)
        } catch let error as SpoolError where error.errno == .noSuchFileOrDirectory {
            return []
        }
        var ids = Set<UInt32>()
        var offset = Int64(Format.segmentHeaderSize)
        while let header = try reader.readHeader(at: offset) {
            if header.dictionaryID != 0 { ids.insert(header.dictionaryID) }
            offset += Int64(header.totalSize)
        }
        return offset == segment.size ? ids : nil
    }
}
