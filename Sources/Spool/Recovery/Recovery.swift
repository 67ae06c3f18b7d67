import Logging

/// What `EventLog.open` learned from the directory.
struct RecoveredLog {
    var meta: MetaRecord
    var segments: [SegmentInfo]
    /// The seq after the last valid record of the active segment.
    var endSeq: UInt64
    /// The active segment's header (checked, or rewritten), for the writer that appends to it.
    var activeHeader: SegmentHeader?
    var consumerOffsets: [String: UInt64]
    var report: RecoveryReport
}

/// The open-time rules: find the segments, check only the active (last) segment's blocks,
/// cut a torn tail, read the consumers' offsets. Open time depends on the active segment's
/// size, not on the log's.
///
/// Without `repairing` (a ``LogSnapshot``) the same rules find the same damage and change
/// nothing: the active segment's valid size is where a writing open would cut it.
enum Recovery {
    static func recover(directory: String, configuration: Configuration, repairing: Bool = true, logger: Logger) throws -> RecoveredLog {
        var report = RecoveryReport()
        report.repaired = repairing
        var bases = [UInt64]()
        var moving = [UInt64]()
        for name in try DirectoryIO.list(directory) {
            if let base = Format.baseSeq(ofSegmentNamed: name) {
                bases.append(base)
            } else if name.hasSuffix(Format.movingSuffix), let base = Format.baseSeq(ofSegmentNamed: String(name.dropLast(Format.movingSuffix.count))) {
                moving.append(base)
            } else if name.hasSuffix(Format.temporarySuffix) {
                report.removedTemporaryFiles.append(name)  // removed below, once the keys checked
            } else if name != Format.metaFileName && name != Format.lockFileName && name != Format.watermarkFileName
                        && name != Format.epochsFileName
                        && name != Format.consumersDirectory
                        && name != Format.deadLetterDirectory && name != Format.dictionariesDirectory && name != Format.keysDirectory {
                report.ignoredFiles.append(name)
            }
        }
        bases.sort()

        let meta = try loadOrCreateMeta(directory: directory, bases: bases, configuration: configuration, repairing: repairing,
                                        report: &report, logger: logger)
        // A wrong key fails the open before anything is repaired (an intact META was only read):
        // an open that fails leaves the files as they were. Read only: the codec writes a new
        // key's check file later.
        if repairing, var encryption = configuration.encryption {
            encryption.current = nil
            try KeyCheck.verify(encryption, logID: meta.logID, directory: directory, configuration: configuration)
        }
        if repairing {
            for name in report.removedTemporaryFiles { try DirectoryIO.remove(directory + "/" + name) }
        }

        var segments = [SegmentInfo]()
        for base in bases {
            let size = try FileIO.size(of: directory + "/" + Format.segmentName(base))
            segments.append(SegmentInfo(baseSeq: base, size: size))
        }
        segments = try setAsideMisfits(segments, directory: directory, repairing: repairing, report: &report, logger: logger)

        var endSeq: UInt64 = 0
        var activeHeader: SegmentHeader?
        if let active = segments.last {
            let watermark = try SyncWatermark.read(directory: directory)
            var recovered = try recoverActive(directory: directory, segment: active, meta: meta, watermark: watermark,
                                              repairing: repairing, permissions: configuration.fileMode, report: &report, logger: logger)
            segments[segments.count - 1].size = recovered.size
            if let moved = recovered.moved { segments.append(moved) }
            // A move a crash interrupted after the old segment was cut at the hole: the moved
            // blocks wait, whole and synced, under their `.moving` name. (Interrupted before the
            // cut, the old segment still held the hole and the scan above moved them again.)
            if let base = moving.filter({ $0 >= recovered.endSeq && $0 > segments.last!.baseSeq }).min() {
                let name = Format.segmentName(base)
                report.powerCutHoles.append(.init(segment: segments.last!.name, records: recovered.endSeq..<base, movedTo: name))
                if repairing {
                    try DirectoryIO.rename(directory + "/" + name + Format.movingSuffix, to: directory + "/" + name)
                    try DirectoryIO.sync(directory)
                    let size = try FileIO.size(of: directory + "/" + name)
                    let segment = SegmentInfo(baseSeq: base, size: size)
                    recovered = try recoverActive(directory: directory, segment: segment, meta: meta, watermark: watermark,
                                                  repairing: repairing, permissions: configuration.fileMode, report: &report, logger: logger)
                    segments.append(SegmentInfo(baseSeq: base, size: recovered.size))
                    if let moved = recovered.moved { segments.append(moved) }
                }
            }
            endSeq = recovered.endSeq
            activeHeader = recovered.header
        }

        // Read only: a writing open repairs them (``repairConsumers(_:directory:permissions:)``)
        // once nothing else can make it fail, so an open that fails leaves them as they were.
        let consumerOffsets = try Consumers.loadOffsets(directory: directory, firstSeq: segments.first?.baseSeq ?? endSeq,
                                                          report: &report, logger: logger)
        if !report.ignoredFiles.isEmpty {
            logger.debug("ignoring files that are not part of the log", metadata: ["files": "\(report.ignoredFiles)"])
        }
        return RecoveredLog(meta: meta, segments: segments, endSeq: endSeq, activeHeader: activeHeader,
                            consumerOffsets: consumerOffsets, report: report)
    }

    /// Takes out of `segments` every file that cannot hold records where its name puts it
    /// (FORMAT.md §6 step 3, "Segments that do not fit"), so that nothing is ever written into
    /// it and no seq is handed out twice:
    /// - a segment before the last that is shorter than a segment header holds nothing, and
    ///   when its base seq is below the end of the segment before it, it overlaps that one;
    /// - the last segment, whose base seq is below the end of the segment before it, overlaps
    ///   records already stored (an empty file named like a segment, a copied-in segment or a
    ///   restored backup, whether its own records end below that end or past it): the writer
    ///   would append there and reuse their seqs. Checked again after each one is taken out,
    ///   against a header-only walk of the segment before it (one sealed segment's block
    ///   headers, whatever the log's length).
    ///
    /// With `repairing`, each is renamed to `<name>.misfit` (then an ignored file, kept for
    /// whoever wants to look at it) and the directory synced; without, it is only left out.
    private static func setAsideMisfits(_ segments: [SegmentInfo], directory: String, repairing: Bool,
                                        report: inout RecoveryReport, logger: Logger) throws -> [SegmentInfo] {
        var kept = [SegmentInfo]()
        var misfits = [(SegmentInfo, String)]()
        for (index, segment) in segments.enumerated() {
            // Only when its name is inside the records before it: a real segment cut short by
            // damage is kept, and its records read as corrupt (FORMAT.md §6), not as missing.
            if index < segments.count - 1 && segment.size < Int64(Format.segmentHeaderSize),
               let previous = kept.last, let previousEnd = try endSeq(of: previous, directory: directory), segment.baseSeq < previousEnd {
                misfits.append((segment, "shorter than a segment header, before the last segment, and its base seq is below \(previousEnd), the end of the segment before it"))
            } else {
                kept.append(segment)
            }
        }
        // Whatever the last segment holds (a first block at its name included: a copy of
        // stored records starts there too), only the end of the one before it says it fits.
        while kept.count >= 2, let previousEnd = try endSeq(of: kept[kept.count - 2], directory: directory),
              kept[kept.count - 1].baseSeq < previousEnd {
            misfits.append((kept.removeLast(), "its base seq is below \(previousEnd), the end of the segment before it"))
        }
        for (segment, why) in misfits {
            report.setAsideSegments.append(segment.name)
            logger.warning(repairing ? "set aside a segment that does not fit the log's sequence" : "found a segment that does not fit the log's sequence",
                           metadata: ["segment": "\(segment.name)", "why": "\(why)"])
            if repairing {
                try DirectoryIO.rename(directory + "/" + segment.name, to: directory + "/" + segment.name + Format.misfitSuffix)
            }
        }
        if repairing && !misfits.isEmpty { try DirectoryIO.sync(directory) }
        return kept
    }

    /// The seq after the last record of `segment`, from a walk over its block headers (no
    /// payloads); nil when its header is unreadable. Damage stops the walk, so the result may
    /// fall short of the segment's real end (never past it): a misfit is then let through,
    /// never a good segment set aside.
    ///
    /// A sealed segment ends at its last block (sealing truncates it there), so the walk first
    /// starts at the first valid block of the last ``endWalkWindow`` bytes, and its answer is
    /// taken when the headers from there lead exactly to the end of the file: a few block
    /// headers, however large the segment (open time stays flat). Otherwise (a block larger
    /// than the window, damage, bytes after the last block) it walks from the first block.
    private static func endSeq(of segment: SegmentInfo, directory: String) throws -> UInt64? {
        let reader = try SegmentReader(path: directory + "/" + segment.name, baseSeq: segment.baseSeq, limit: segment.size)
        guard try reader.checkHeader(logID: nil) == nil else { return nil }
        let first = Int64(Format.segmentHeaderSize)
        if segment.size - endWalkWindow > first, let tail = try? reader.resync(after: segment.size - endWalkWindow - 1) {
            let (end, stop) = try walkHeaders(reader, from: tail.offset, base: segment.baseSeq)
            if stop == segment.size { return end }
        }
        return try walkHeaders(reader, from: first, base: segment.baseSeq).end
    }

    /// How far before a sealed segment's end ``endSeq(of:directory:)`` looks for its last blocks.
    static let endWalkWindow: Int64 = 256 * 1024

    /// Walks block headers from `offset` until one is cut short or invalid: the greatest end
    /// seq met (`base` if none), and the offset where the walk stopped.
    private static func walkHeaders(_ reader: SegmentReader, from offset: Int64, base: UInt64) throws -> (end: UInt64, stop: Int64) {
        var offset = offset
        var end = base
        while let header = try reader.readHeader(at: offset) {
            end = max(end, header.endSeq)
            offset += Int64(header.totalSize)
        }
        return (end, offset)
    }

    /// What a writing open does to the consumers' files, last, when nothing else can make it
    /// fail: removes their temporary files, rewrites an unreadable offset file with the oldest
    /// stored record, and makes every other one durable (its last commit may have been `.fast`,
    /// and retention trusts the offset read at open to delete segments).
    /// A live committer's temporary file and unreadable offset file are not listed for repair
    /// (`Consumers.loadOffsets`): it owns them.
    static func repairConsumers(_ recovered: RecoveredLog, directory: String, permissions: UInt16) throws {
        let consumersDirectory = Consumers.directory(of: directory)
        for name in recovered.report.removedTemporaryFiles where name.hasPrefix(Format.consumersDirectory + "/") {
            try DirectoryIO.remove(directory + "/" + name)
        }
        for (name, nextSeq) in recovered.consumerOffsets.sorted(by: { $0.key < $1.key }) {
            let path = Consumers.path(of: name, logDirectory: directory)
            if recovered.report.resetConsumers.contains(name) {
                try OffsetFile.create(path, directory: consumersDirectory, nextSeq: nextSeq, permissions: permissions)
            } else {
                let file = try FileIO.open(path, .readWrite)
                defer { file.close() }
                try file.syncData()
            }
        }
    }

    /// Reads META; recreates it from a segment header when it is missing or damaged (without
    /// `repairing`, only takes the identity from the header).
    private static func loadOrCreateMeta(directory: String, bases: [UInt64], configuration: Configuration, repairing: Bool,
                                         report: inout RecoveryReport, logger: Logger) throws -> MetaRecord {
        let path = directory + "/" + Format.metaFileName
        let metaExists = DirectoryIO.exists(path)
        if metaExists {
            let file = try FileIO.open(path, .readOnly)
            let bytes = try file.read(count: Format.metaSize + 1, at: 0)
            file.close()
            // The CRC before the version: a flipped bit in the version is damage like any other
            // (rebuilt below), and only an intact META of a newer version is refused.
            if let version = MetaRecord.intactVersion(bytes), version > Format.metaVersion {
                throw SpoolError(.unsupportedVersion, "META format version \(version) is newer than this reader's (\(Format.metaVersion))", path: path)
            }
            if let meta = MetaRecord.parse(bytes) {
                try checkSegmentsBelong(to: meta, directory: directory, bases: bases, metaPath: path)
                return meta
            }
        }
        // Missing or damaged: the identity is also in every segment header.
        var meta = MetaRecord(logID: .random(), createdMillis: wallClockMillis())
        var recovered = false
        for base in bases {
            guard let reader = try? SegmentReader(path: directory + "/" + Format.segmentName(base), baseSeq: base, limit: Int64(Format.segmentHeaderSize)),
                  let bytes = try? reader.file.read(count: Format.segmentHeaderSize, at: 0),
                  case .success(let header) = bytes.withUnsafeBytes({ SegmentHeader.parse($0) }) else { continue }
            meta = MetaRecord(logID: header.logID, createdMillis: header.createdMillis)
            recovered = true
            break
        }
        if !repairing {
            if recovered { return meta }
            // A snapshot opens only a directory holding META or a segment: with no segment, META is there but damaged.
            throw SpoolError(.corrupt, bases.isEmpty ? "META is damaged and there is no segment whose header names the log"
                                                     : "META is missing or damaged and no segment header names the log", path: path)
        }
        if !recovered && (metaExists || !bases.isEmpty) {
            // A log was here (a damaged META, or segments none of whose headers can be read):
            // its identity is lost; keep a new one, say so.
            report.corruptions.append("META was missing or damaged and no segment header names the log; a new log id was made")
            logger.warning("META was missing or damaged and no segment header names the log; a new log id was made", metadata: ["directory": "\(directory)"])
        }
        report.created = bases.isEmpty && !metaExists
        try DirectoryIO.writeAtomically(meta.encoded(), to: path, directory: directory, permissions: configuration.fileMode)
        return meta
    }

    /// The newest segment whose header is readable must name META's log: a META copied in from
    /// another log would otherwise have recovery rewrite an empty active segment's header with
    /// the foreign identity, and every older segment would then read as another log's.
    /// Nothing is rewritten: the open fails, naming both.
    private static func checkSegmentsBelong(to meta: MetaRecord, directory: String, bases: [UInt64], metaPath: String) throws {
        for base in bases.reversed() {
            let name = Format.segmentName(base)
            guard let reader = try? SegmentReader(path: directory + "/" + name, baseSeq: base, limit: Int64(Format.segmentHeaderSize)),
                  (try? reader.checkHeader(logID: nil)) == .some(nil), let header = reader.header else { continue }
            guard header.logID == meta.logID else {
                throw SpoolError(.corrupt, "META names log \(meta.logID) but segment \(name) belongs to log \(header.logID); "
                                    + "put the log's own META back, or remove META to have it rebuilt from the segments", path: metaPath)
            }
            return
        }
    }

    /// Scans every block of the active segment, truncates a torn tail, and returns the
    /// segment's valid size, the seq after its last record and its header.
    ///
    /// A torn tail is damage with nothing valid after it: only it is ever cut. Damage followed
    /// by a valid block that continues the seqs keeps that block. It is a power cut's hole
    /// when ``isPowerCutHole(_:_:interrupting:watermark:)`` says so (`watermark` is the synced
    /// watermark, FORMAT.md §6, nil for a log without one): the blocks after it move to a
    /// segment of their own and the hole's seqs read as *missing*. Anything else is
    /// corruption, left in place for readers to report; a damaged header with valid blocks
    /// after it refuses the log.
    private static func recoverActive(directory: String, segment: SegmentInfo, meta: MetaRecord, watermark: UInt64?,
                                      repairing: Bool, permissions: UInt16, report: inout RecoveryReport, logger: Logger) throws -> RecoveredActive {
        let path = directory + "/" + segment.name
        let reader = try SegmentReader(path: path, baseSeq: segment.baseSeq, limit: segment.size)
        if let problem = try reader.checkHeader(logID: meta.logID) {
            // A segment created just before a crash may have no complete header: nothing in it
            // was acknowledged, so it is rewritten empty. A header is durable before any block
            // is written after it, so valid blocks after a damaged one are never a crash's or a
            // power cut's, whatever the watermark says: the file is left for someone to look at.
            let validBlock = segment.size > Int64(Format.segmentHeaderSize)
                ? try reader.resync(after: Int64(Format.segmentHeaderSize) - 1) : nil
            if validBlock != nil {
                throw SpoolError(.corrupt, "the active segment's header is damaged (\(problem)) but it holds valid blocks; move the file aside to open the log", path: path)
            }
            let header = SegmentHeader(baseSeq: segment.baseSeq, createdMillis: wallClockMillis(), logID: meta.logID)
            guard repairing else {
                if segment.size > 0 { report.tornTail = .init(segment: segment.name, offset: 0, bytes: segment.size) }
                return RecoveredActive(size: 0, endSeq: segment.baseSeq, header: header)
            }
            let writable = try FileIO.open(path, .readWrite)
            defer { writable.close() }
            try writable.truncate(to: 0)
            try writable.write(header.encoded(), at: 0)
            try writable.syncData()
            if segment.size > 0 {
                report.tornTail = .init(segment: segment.name, offset: 0, bytes: segment.size)
                logger.info("rewrote the header of a segment created just before a crash", metadata: [
                    "segment": "\(segment.name)", "bytes": "\(segment.size)",
                ])
            }
            return RecoveredActive(size: Int64(Format.segmentHeaderSize), endSeq: segment.baseSeq, header: header)
        }
        var offset = Int64(Format.segmentHeaderSize)
        var validEnd = offset
        var endSeq = segment.baseSeq
        var hole: (offset: Int64, next: Int64, nextHeader: BlockHeader)?
        while offset < segment.size {
            switch try reader.readBlock(at: offset, keepingPayload: false) {
            case .valid(let header) where header.firstSeq >= endSeq:
                offset += Int64(header.totalSize)
                validEnd = offset
                endSeq = header.endSeq
                continue
            case .valid, .truncated, .corrupt:
                break
            }
            // Not a valid continuation. If a valid block continuing the seqs follows (past any
            // stale copy of an earlier block, which readers skip), the damage is in the middle
            // and nothing after it is ever cut. Otherwise it is a torn tail: cut below.
            guard let next = try reader.resync(after: offset, wanted: { [endSeq] in $0.firstSeq >= endSeq }) else { break }
            if try isPowerCutHole(reader.file, offset..<next.offset, interrupting: endSeq, watermark: watermark) {
                // A page the page cache never wrote back: its records are lost to the power
                // cut, and the blocks after it move to a segment of their own (below).
                hole = (offset, next.offset, next.header)
                break
            }
            report.corruptions.append("\(segment.name): damaged bytes \(offset)..<\(next.offset) (records \(endSeq)..<\(next.header.firstSeq))")
            logger.warning("damaged bytes inside the active segment; readers report the records lost", metadata: [
                "segment": "\(segment.name)", "offset": "\(offset)..<\(next.offset)", "records": "\(endSeq)..<\(next.header.firstSeq)",
            ])
            offset = next.offset
        }
        let header = reader.header!  // checkHeader passed above
        if let hole {
            report.powerCutHoles.append(.init(segment: segment.name, records: endSeq..<hole.nextHeader.firstSeq,
                                              movedTo: Format.segmentName(hole.nextHeader.firstSeq)))
            let moved = try moveBlocks(of: reader, from: hole.next, first: hole.nextHeader, segment: segment, header: header,
                                       directory: directory, watermark: watermark, repairing: repairing, permissions: permissions,
                                       report: &report)
            if repairing {
                // The blocks are durable under their `.moving` name: only now is the old segment
                // cut at the hole, then the new one renamed into place.
                let writable = try FileIO.open(path, .readWrite)
                defer { writable.close() }
                try writable.truncate(to: hole.offset)
                try writable.syncData()
                try DirectoryIO.rename(directory + "/" + moved.segment.name + Format.movingSuffix, to: directory + "/" + moved.segment.name)
                try DirectoryIO.sync(directory)
            }
            logger.warning(repairing ? "records lost to a power cut inside the active segment; moved the blocks after them to a segment of their own"
                                     : "records lost to a power cut inside the active segment (the next writing open moves the blocks after them)", metadata: [
                "segment": "\(segment.name)", "records": "\(endSeq)..<\(hole.nextHeader.firstSeq)", "movedTo": "\(moved.segment.name)",
            ])
            // A snapshot reads the old segment up to the hole only: the blocks after it are
            // read once a writing open has moved them.
            guard repairing else { return RecoveredActive(size: hole.offset, endSeq: endSeq, header: header) }
            return RecoveredActive(size: hole.offset, endSeq: moved.endSeq, header: moved.header, moved: moved.segment)
        }
        if validEnd < segment.size {
            let preallocated = try isZero(reader.file, from: validEnd, to: segment.size)
            if repairing {
                let writable = try FileIO.open(path, .readWrite)
                defer { writable.close() }
                try writable.truncate(to: validEnd)
                try writable.syncData()
            }
            if preallocated {
                report.preallocatedBytesCut = segment.size - validEnd
            } else {
                report.tornTail = .init(segment: segment.name, offset: validEnd, bytes: segment.size - validEnd)
                logger.info(repairing ? "truncated a torn tail left by an interrupted write" : "found a torn tail (left as it is: a snapshot repairs nothing)", metadata: [
                    "segment": "\(segment.name)", "offset": "\(validEnd)", "bytes": "\(segment.size - validEnd)",
                ])
            }
        }
        return RecoveredActive(size: validEnd, endSeq: endSeq, header: header)
    }

    /// What recovering the active segment found: its valid size, the seq after its last record
    /// and its header; when records after a power cut's hole were moved, their new segment
    /// (then the active one, whose end and header these are).
    struct RecoveredActive {
        var size: Int64
        var endSeq: UInt64
        var header: SegmentHeader
        var moved: SegmentInfo?
    }

    /// Whether the damaged bytes `damage`, interrupting the seqs at `seq`, are what a power cut
    /// leaves of records never synced (FORMAT.md §6, "Holes a power cut leaves"): the records
    /// are at or past the synced watermark, and the damage holds a page the page cache never
    /// wrote back, which reads as zeros from where it was last synced to its 4 KiB boundary.
    /// Anything else (a flipped bit, a page of other bytes, damage below the watermark) is
    /// corruption.
    static func isPowerCutHole(_ file: FileIO, _ damage: Range<Int64>, interrupting seq: UInt64, watermark: UInt64?) throws -> Bool {
        guard isNeverSynced(seq, below: watermark) else { return false }
        let page = Int64(pageSize)
        var boundary = (damage.lowerBound / page + 1) * page
        while boundary <= damage.upperBound {
            if try isZero(file, from: max(damage.lowerBound, boundary - page), to: boundary) { return true }
            boundary += page
        }
        return false
    }

    /// The page the page cache writes back whole or not at all (Linux's, on every platform Spool runs on).
    static let pageSize = 4096

    /// Moves the blocks of the active segment from `offset` (the first valid block after a
    /// power cut's hole, `first`) into a new segment named by its first seq, with the old
    /// header's identity, version and created time (compact headers are rewritten against the
    /// new base; payloads and their checks are copied as they are): written whole and synced
    /// under its `.moving` name (``Format/movingSuffix``); the caller cuts the old segment at
    /// the hole, then renames it into place.
    /// Further holes after it are left out (a forward gap reads as *missing*); other damage is
    /// copied as it is (readers report it); a torn tail is left behind. Without `repairing`,
    /// only reports what it would do (the returned size is then meaningless).
    private static func moveBlocks(of reader: SegmentReader, from offset: Int64, first: BlockHeader, segment: SegmentInfo,
                                   header: SegmentHeader, directory: String, watermark: UInt64?, repairing: Bool, permissions: UInt16,
                                   report: inout RecoveryReport) throws -> (segment: SegmentInfo, endSeq: UInt64, header: SegmentHeader) {
        var newHeader = header
        newHeader.baseSeq = first.firstSeq
        let name = Format.segmentName(newHeader.baseSeq)
        var bytes = newHeader.encoded()
        var position = offset
        var endSeq = first.firstSeq
        while position < segment.size {
            if case .valid(let block) = try reader.readBlock(at: position, keepingPayload: false), block.firstSeq >= endSeq {
                if repairing {
                    let start = bytes.count
                    bytes += try reader.file.read(count: block.totalSize, at: position)
                    block.store(into: &bytes, at: start, segmentBase: newHeader.baseSeq)
                }
                position += Int64(block.totalSize)
                endSeq = block.endSeq
                continue
            }
            guard let next = try reader.resync(after: position, wanted: { [endSeq] in $0.firstSeq >= endSeq }) else { break }
            if try isPowerCutHole(reader.file, position..<next.offset, interrupting: endSeq, watermark: watermark) {
                report.powerCutHoles.append(.init(segment: segment.name, records: endSeq..<next.header.firstSeq, movedTo: name))
            } else {
                if repairing { bytes += try reader.file.read(count: Int(next.offset - position), at: position) }
                report.corruptions.append("\(segment.name): damaged bytes \(position)..<\(next.offset) (records \(endSeq)..<\(next.header.firstSeq)), moved to \(name)")
            }
            position = next.offset
        }
        if position < segment.size {
            if try isZero(reader.file, from: position, to: segment.size) {
                report.preallocatedBytesCut = segment.size - position
            } else {
                report.tornTail = .init(segment: segment.name, offset: position, bytes: segment.size - position)
            }
        }
        if repairing {
            try DirectoryIO.writeAtomically(bytes, to: directory + "/" + name + Format.movingSuffix, directory: directory, permissions: permissions)
        }
        return (SegmentInfo(baseSeq: newHeader.baseSeq, size: Int64(bytes.count)), endSeq, newHeader)
    }

    /// Whether the record `seq` was never synced as far as the watermark knows: at or past it.
    /// Without a watermark (a log written before it existed) every record may have been.
    private static func isNeverSynced(_ seq: UInt64, below watermark: UInt64?) -> Bool {
        watermark.map { seq >= $0 } ?? false
    }

    /// Whether `file` holds only zero bytes in `start..<end` (read in 1 MiB chunks).
    static func isZero(_ file: FileIO, from start: Int64, to end: Int64) throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: Int(min(end - start, 1 << 20)))
        var offset = start
        while offset < end {
            let want = Int(min(Int64(chunk.count), end - offset))
            let n = try chunk.withUnsafeMutableBytes { try file.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<want]), at: offset) }
            guard n > 0 else { return false }
            if chunk[0..<n].contains(where: { $0 != 0 }) { return false }
            offset += Int64(n)
        }
        return true
    }
}
