#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Crypto
import Logging
import SystemPackage

/// The ids a log's records are sent under: the log's own id (``base``), then, from each
/// **epoch**'s first seq on, that epoch's id (FORMAT.md §13).
///
/// A record's id is `"<log id>-<seq>"` and must name one record only. A copy of a log's
/// directory (an app's data restored from a backup onto a second phone, a directory copied to
/// another path or machine while the original still writes) holds the same id and the same
/// seqs as its original, and both would then append different records under the same seqs.
/// So a log remembers where it was last opened for writing (its directory's inode number, and
/// on Linux a digest of `/etc/machine-id`); opened somewhere else, it starts an epoch at its
/// next seq with a new random id. The records both copies hold (the seqs below the epoch)
/// keep their ids, so a destination stores them once; the records each appends after keep
/// theirs apart.
///
/// Thread safety: a value type; use freely from any thread.
public struct LogEpochs: Sendable, Hashable {
    /// One epoch: the records from ``firstSeq`` on (to the next epoch's) go out as ``id``'s.
    public struct Epoch: Sendable, Hashable {
        /// The seq of the epoch's first record.
        public let firstSeq: UInt64
        /// The id its records are sent under.
        public let id: LogID
    }

    /// The log's own id (META): the id of the records below the first epoch.
    public let base: LogID
    /// The epochs, in increasing ``Epoch/firstSeq`` order; empty for a log never opened
    /// anywhere but where it was made.
    public private(set) var epochs: [Epoch]

    /// The most epochs a log keeps: a log opened in a new place more often than this keeps
    /// the id of its last epoch from then on, and says so in its log.
    static let maxEpochs = 4096

    /// A log with no epoch: every record goes out under `base`.
    public init(base: LogID) {
        self.base = base
        self.epochs = []
    }

    init(base: LogID, epochs: [Epoch]) {
        self.base = base
        self.epochs = epochs
    }

    /// The id record `seq` goes out under.
    public func id(forSeq seq: UInt64) -> LogID {
        epochs.last { $0.firstSeq <= seq }?.id ?? base
    }

    /// The event id of record `seq`: `"<id(forSeq: seq)>-<seq>"`.
    public func eventID(seq: UInt64) -> String {
        id(forSeq: seq).eventID(seq: seq)
    }
}

// MARK: - The file

extension LogEpochs {
    /// Where a log's directory is: its inode number, and the digest of the machine's id when
    /// the system has one. Two places differ when either differs (a machine id missing on
    /// either side is not compared: a container without `/etc/machine-id` is no new machine).
    struct Place: Equatable {
        var inode: UInt64
        /// The first 8 bytes of SHA-256 of `/etc/machine-id`, as 16 hex digits (the id itself
        /// is confidential: machine-id(5)).
        var machine: String?

        func differs(from other: Place) -> Bool {
            if inode != other.inode { return true }
            if let machine, let other = other.machine { return machine != other }
            return false
        }

        /// The place of `directory` now.
        static func current(of directory: String) throws -> Place {
            var info = stat()
            guard stat(directory, &info) == 0 else { throw SpoolError.system("stat", path: directory, Errno(rawValue: errno)) }
            return Place(inode: UInt64(info.st_ino), machine: machineDigest())
        }

        private static func machineDigest() -> String? {
            #if os(Linux)
            guard let file = try? FileIO.open("/etc/machine-id", .readOnly) else { return nil }
            defer { file.close() }
            guard let bytes = try? file.read(count: 256, at: 0) else { return nil }
            let id = bytes.filter { $0 != UInt8(ascii: "\n") && $0 != UInt8(ascii: " ") }
            guard !id.isEmpty else { return nil }
            return LogID(bytes: Array(SHA256.hash(data: id).prefix(16))).description.prefix(16).lowercased()
            #else
            return nil
            #endif
        }
    }

    /// The largest `EPOCHS` file read: a larger one is damage.
    static let maxFileSize = 256 * 1024
    private static let magic = "spool epochs 1"

    /// The epochs of the log in `directory` whose own id is `base`, as its `EPOCHS` file says
    /// (none when there is no such file), and the place it names. Blocking: reads the file.
    /// - Throws: ``SpoolError`` `.corrupt` naming the file and the line when it does not parse;
    ///   `.io` when it cannot be read.
    static func read(directory: String, base: LogID) throws -> (LogEpochs, Place?) {
        let path = directory + "/" + Format.epochsFileName
        guard DirectoryIO.exists(path) else { return (LogEpochs(base: base), nil) }
        let file = try FileIO.open(path, .readOnly)
        defer { file.close() }
        let bytes = try file.read(count: maxFileSize + 1, at: 0)
        guard bytes.count <= maxFileSize else {
            throw SpoolError(.corrupt, "is larger than \(maxFileSize) bytes: not an epochs file", path: path)
        }
        return try parse(bytes, base: base, path: path)
    }

    /// The epochs of the log in `directory` whose own id is `base`, as its `EPOCHS` file says
    /// (none when there is no such file). Blocking: reads the file; never writes it.
    /// - Throws: ``SpoolError`` `.corrupt` naming the file and the line when it does not parse,
    ///   or when it is larger than 256 KiB; `.io` when it cannot be read.
    public static func load(directory: String, base: LogID) throws -> LogEpochs {
        try read(directory: directory, base: base).0
    }

    static func parse(_ bytes: [UInt8], base: LogID, path: String) throws -> (LogEpochs, Place?) {
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.hasSuffix("\n") else { throw SpoolError(.corrupt, "does not end with a newline: cut short", path: path) }
        let lines = text.dropLast().split(separator: "\n", omittingEmptySubsequences: false)
        guard lines.first == Substring(magic) else { throw SpoolError(.corrupt, "line 1 is not \"\(magic)\"", path: path) }
        var place: Place?
        var epochs: [Epoch] = []
        for (index, line) in lines.enumerated().dropFirst() {
            let fields = line.split(separator: " ", omittingEmptySubsequences: false)
            let bad = SpoolError(.corrupt, "line \(index + 1) is neither \"place <inode> <machine>\" nor \"<first seq> <log id>\"", path: path)
            if index == 1 {
                guard fields.count == 3, fields[0] == "place", let inode = UInt64(fields[1]),
                      fields[2] == "-" || (fields[2].count == 16 && fields[2].allSatisfy(\.isHexDigit)) else { throw bad }
                place = Place(inode: inode, machine: fields[2] == "-" ? nil : String(fields[2]))
                continue
            }
            guard fields.count == 2, let first = UInt64(fields[0]), first <= Format.seqCeiling,
                  let id = LogID(hex: String(fields[1])) else { throw bad }
            guard epochs.last.map({ $0.firstSeq < first }) ?? true, epochs.count < maxEpochs else {
                throw SpoolError(.corrupt, "line \(index + 1): epochs must start at increasing seqs, at most \(maxEpochs) of them", path: path)
            }
            epochs.append(Epoch(firstSeq: first, id: id))
        }
        return (LogEpochs(base: base, epochs: epochs), place)
    }

    func encoded(place: Place) -> [UInt8] {
        var text = Self.magic + "\n" + "place \(place.inode) \(place.machine ?? "-")\n"
        for epoch in epochs { text += "\(epoch.firstSeq) \(epoch.id)\n" }
        return Array(text.utf8)
    }

    /// The epochs of a log being opened for writing, whose next record gets `nextSeq`: when
    /// the directory is not where the log was last opened for writing, a new epoch starts at
    /// `nextSeq` (replacing an epoch that starts there already: no record has its id), and
    /// the file is rewritten atomically with the place, before any record is appended. A
    /// log without the file gets one naming its place. Blocking.
    static func settle(directory: String, base: LogID, nextSeq: UInt64, permissions: UInt16, logger: Logger) throws -> LogEpochs {
        var (epochs, stored) = try read(directory: directory, base: base)
        let here = try Place.current(of: directory)
        if let stored, !stored.differs(from: here) { return epochs }
        if stored != nil {
            if epochs.epochs.last?.firstSeq == nextSeq { epochs.epochs.removeLast() }
            if epochs.epochs.count < maxEpochs {
                let epoch = Epoch(firstSeq: nextSeq, id: .random())
                epochs.epochs.append(epoch)
                logger.notice("the log's directory is not where the log was last opened (a copy or a restore): its records from this seq on go out under a new id",
                              metadata: ["directory": "\(directory)", "seq": "\(nextSeq)", "id": "\(epoch.id)"])
            } else {
                logger.warning("the log was opened in \(maxEpochs) places: its records keep the last epoch's id",
                               metadata: ["directory": "\(directory)"])
            }
        }
        try DirectoryIO.writeAtomically(epochs.encoded(place: here), to: directory + "/" + Format.epochsFileName,
                                        directory: directory, permissions: permissions)
        return epochs
    }
}
