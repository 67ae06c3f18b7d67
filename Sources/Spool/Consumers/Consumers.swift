import Logging
import Synchronization

/// Consumer names and offset files: validation, loading at open, and the per-log cache.
enum Consumers {
    /// 1 to 64 characters from `[A-Za-z0-9._-]`, not starting with a dot.
    static func validate(_ name: String) throws {
        let bytes = Array(name.utf8)
        let valid = !bytes.isEmpty && bytes.count <= 64 && bytes[0] != UInt8(ascii: ".") && bytes.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
                || c == UInt8(ascii: ".") || c == UInt8(ascii: "_") || c == UInt8(ascii: "-")
        }
        guard valid else {
            throw SpoolError(.invalidConsumerName, "consumer name \"\(name.prefix(80))\" is invalid: use 1 to 64 characters from A-Z a-z 0-9 . _ - (not starting with a dot)")
        }
    }

    static func directory(of logDirectory: String) -> String { logDirectory + "/" + Format.consumersDirectory }
    static func path(of name: String, logDirectory: String) -> String {
        directory(of: logDirectory) + "/" + name + Format.offsetSuffix
    }

    /// Reads every consumer's offset, changing no file. An offset file with no valid slot
    /// (zero-length, torn, garbage) reads as `firstSeq`, the oldest stored record (re-delivery,
    /// never a jump forward), and is listed in `report.resetConsumers`; temporary files are
    /// listed in `report.removedTemporaryFiles`. A writing open repairs both afterwards
    /// (`Recovery.repairConsumers`), once nothing else can make it fail.
    ///
    /// A consumer whose committer in another process is live (it holds `consumers/<name>.lock`)
    /// owns its files: its `<name>.offset.tmp` is a creation in progress, not a leftover, and its
    /// offset file is never reset under it (it keeps writing slots into the file it has open).
    /// An unreadable one still reads as `firstSeq`, so retention keeps everything meanwhile.
    static func loadOffsets(directory: String, firstSeq: UInt64, report: inout RecoveryReport, logger: Logger) throws -> [String: UInt64] {
        let consumersDirectory = self.directory(of: directory)
        guard DirectoryIO.exists(consumersDirectory) else { return [:] }
        var offsets = [String: UInt64]()
        let creating = Format.offsetSuffix + Format.temporarySuffix
        for file in try DirectoryIO.list(consumersDirectory) {
            if file.hasSuffix(Format.temporarySuffix) {
                let inProgress = file.hasSuffix(creating)
                    && DirectoryLock.committerIsLive(consumer: String(file.dropLast(creating.count)), logDirectory: directory)
                if !inProgress { report.removedTemporaryFiles.append(Format.consumersDirectory + "/" + file) }
                continue
            }
            guard file.hasSuffix(Format.offsetSuffix) else { continue }  // `<name>.lock` too
            let name = String(file.dropLast(Format.offsetSuffix.count))
            guard (try? validate(name)) != nil else { continue }
            let path = consumersDirectory + "/" + file
            if let slot = try OffsetFile.read(path) {
                offsets[name] = slot.nextSeq
            } else if DirectoryLock.committerIsLive(consumer: name, logDirectory: directory) {
                offsets[name] = firstSeq
            } else {
                logger.warning("a consumer's offset file is unreadable; it restarts at the oldest stored record", metadata: [
                    "consumer": "\(name)", "path": "\(path)", "restartSeq": "\(firstSeq)",
                ])
                report.resetConsumers.append(name)
                offsets[name] = firstSeq
            }
        }
        return offsets
    }
}

/// The consumers of one open log, one instance per name.
final class ConsumerCache: Sendable {
    private let consumers = RankedMutex<[String: Consumer]>(.consumerCache, [:])

    func consumer(named name: String, log: EventLog) throws -> Consumer {
        try Consumers.validate(name)
        return try consumers.withLock { cache in
            if let existing = cache[name] { return existing }
            let consumer = try Consumer(name: name, log: log)
            cache[name] = consumer
            return consumer
        }
    }

    /// The names of the consumers this process has made (it commits their offsets itself).
    var names: Set<String> { consumers.withLock { Set($0.keys) } }

    func closeAll() {
        // Closed outside the cache's lock: a commit in progress holds its committer lock and
        // may ask the cache for its names (retention), so taking the two the other way round
        // could deadlock.
        let all = consumers.withLock { cache in
            defer { cache.removeAll() }
            return Array(cache.values)
        }
        for consumer in all { consumer.releaseCommitterLock() }
    }
}
