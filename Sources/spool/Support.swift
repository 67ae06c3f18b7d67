import ArgumentParser
import Foundation
import Logging
import Spool
import SystemPackage

/// The log directory argument every command that works on a log takes.
struct LogDirectory: ParsableArguments {
    @Argument(help: "The log's directory.")
    var directory: String

    @Option(help: ArgumentHelp("Read encrypted blocks with the keys in this file.",
                               discussion: "One key per line: '<key id> <64 hex digits>'; '#' starts a comment, at the start of a line or after a key. Only `spool append` encrypts new blocks (with --key-id); other commands only read."))
    var keyFile: String?

    @Option(help: ArgumentHelp("The log of this writer in the group DIR (DIR/writers/NAME): an app and its extensions each append to their own.", valueName: "name"))
    var writer: String?

    /// With `--writer`, the log is `DIR/writers/NAME` (created by `spool append`).
    mutating func validate() throws {
        guard let writer else { return }
        do {
            directory = try LogGroup.directory(group: directory, writer: writer)
        } catch let error as SpoolError {
            throw ValidationError(error.message)
        }
    }

    /// The writer logs of a group (DIR holds `writers/` and no log of its own) when no
    /// `--writer` chose one: each as the directory option of its own log; nil for a log.
    func groupWriters() throws -> [(name: String, log: LogDirectory)]? {
        guard writer == nil, LogGroup.isGroup(directory), !FileManager.default.fileExists(atPath: directory + "/META") else { return nil }
        return try LogGroup.writers(in: directory).map { name in
            var member = self
            member.writer = name
            member.directory = try LogGroup.directory(group: directory, writer: name)
            return (name, member)
        }
    }

    /// Opens the log, applying the library's recovery rules (a torn tail is cut and reported),
    /// with the keys of `--key-file` for reading. Unless `creating`, the directory must already
    /// hold a log: a mistyped path must not become a new, empty log that "verifies" clean.
    /// What recovery repaired is said on standard error.
    func open(_ configuration: Configuration = Configuration(), creating: Bool = false) throws -> EventLog {
        if !creating { try requireLog() }
        let log = try EventLog.open(directory: directory, configuration: withKeys(configuration), logger: commandLogger())
        Self.reportRecovery(log.recoveryReport)
        return log
    }

    /// A follower of the log from `seq` (the oldest stored record if nil); it writes nothing.
    func follower(from seq: UInt64?) throws -> LogFollower {
        try requireLog()
        return try LogFollower(directory: directory, from: seq, configuration: withKeys(Configuration()), logger: commandLogger())
    }

    /// Whether another process has the log open for writing now.
    var hasLiveWriter: Bool { LogSnapshot.writerIsLive(directory: directory) }

    /// Consumer `name` for a command that reads and commits it. When another process has the
    /// log open for writing (asked once, here), or with `beside`, it is a ``DetachedConsumer``,
    /// a committer beside the writer that never takes the writer's lock; otherwise the log is
    /// opened (recovery applied) and it is the log's own ``Consumer``.
    ///
    /// A missing consumer is refused unless `creating`; before one is made, `checkNew` is given
    /// the log's oldest stored record and the seq past its last one, so that a command refusing
    /// what it was asked leaves no new consumer behind (holding retention back).
    func openConsumer(_ name: String, creating: Bool, beside: Bool = false,
                      checkNew: ((_ first: UInt64, _ next: UInt64) throws -> Void)? = nil) throws -> OpenConsumer {
        if beside || hasLiveWriter {
            if creating, let checkNew {
                let snapshot = try self.snapshot(reportingRecovery: false)
                defer { snapshot.close() }
                if !snapshot.consumerNames.contains(name) { try checkNew(snapshot.firstSeq, snapshot.endSeq) }
            }
            let detached = try detachedConsumer(name, creating: creating)
            return OpenConsumer(consumer: detached, close: { detached.close() })
        }
        let eventLog = try open()
        do {
            if !eventLog.consumerNames.contains(name) {
                if !creating { try Self.requireConsumer(name, in: eventLog.consumerNames) }
                try checkNew?(eventLog.firstSeq, eventLog.nextSeq)
            }
            return OpenConsumer(consumer: try eventLog.consumer(named: name), close: { try eventLog.close() })
        } catch {
            try? eventLog.close()
            throw error
        }
    }

    /// The consumer `name` as a committer beside the writing process: it never takes the
    /// writer's lock. A missing consumer is refused unless `creating`.
    func detachedConsumer(_ name: String, creating: Bool) throws -> DetachedConsumer {
        try requireLog()
        do {
            return try DetachedConsumer(directory: directory, name: name, creating: creating, configuration: withKeys(Configuration()),
                                        logger: commandLogger())
        } catch let error as SpoolError where error.code == .invalidArgument && !creating {
            // The consumer does not exist: say which ones do (a second look, only on this failure).
            let snapshot = try self.snapshot(reportingRecovery: false)
            defer { snapshot.close() }
            try Self.requireConsumer(name, in: snapshot.consumerNames)
            throw error
        }
    }

    /// Opens a read-only snapshot (what `verify`, `stat` and `dump` without `--commit` read):
    /// it takes no lock and creates or changes no file; what a writing open would repair is
    /// said on standard error unless `reportingRecovery` is false.
    func snapshot(reportingRecovery: Bool = true) throws -> LogSnapshot {
        try requireLog()
        let snapshot = try LogSnapshot(directory: directory, configuration: withKeys(Configuration()), logger: commandLogger())
        if reportingRecovery { Self.reportRecovery(snapshot.recoveryReport) }
        return snapshot
    }

    private func requireLog() throws {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        guard entries.contains("META") || entries.contains(where: { $0.hasSuffix(".seg") }) else {
            throw ValidationError("\(directory) is not a Spool log (no META file and no segment); `spool append` creates one")
        }
    }

    /// The keys of `--key-file`, or nil without one.
    func keys() throws -> [UInt32: [UInt8]]? {
        guard let keyFile else { return nil }
        guard let text = try? String(contentsOfFile: keyFile, encoding: .utf8) else {
            throw ValidationError("cannot read the key file \(keyFile)")
        }
        return try Configuration.Encryption.parseKeyFile(text)
    }

    /// `configuration` with the keys of `--key-file` added (for reading; which key new blocks
    /// use, if any, is `configuration`'s).
    private func withKeys(_ configuration: Configuration) throws -> Configuration {
        guard let keys = try keys() else { return configuration }
        var configuration = configuration
        configuration.encryption = .init(keys: keys.merging(configuration.encryption?.keys ?? [:]) { $1 },
                                         current: configuration.encryption?.current)
        return configuration
    }

    /// The `--create` flag's help, for the commands that commit a consumer's offset (`commit`, `sync`).
    static let createConsumerHelp: ArgumentHelp = "Create the consumer if it does not exist (without it, a mistyped name is refused rather than made into a consumer that holds retention back)."

    /// Refuses a consumer name the log does not have: a mistyped name must not become a new
    /// consumer, which would hold retention back for ever.
    static func requireConsumer(_ name: String, in names: [String]) throws {
        guard names.contains(name) else {
            let known = names.isEmpty ? "it has none" : "it has: \(names.joined(separator: ", "))"
            throw ValidationError("the log has no consumer named \(name) (\(known))")
        }
    }

    /// What opening repaired (or, for a snapshot, found and left), one line each on standard error.
    private static func reportRecovery(_ report: RecoveryReport) {
        for line in recoveryLines(report) { Output.error("# recovery \(line)") }
    }

    /// What `report` says, in words: what was repaired, or for a snapshot what the next
    /// writing open will repair.
    static func recoveryLines(_ report: RecoveryReport) -> [String] {
        var lines = [String]()
        if let torn = report.tornTail {
            let what = "a torn last block (a write interrupted by a crash, or a last block damaged on disk)"
            lines.append(report.repaired
                ? "cut \(torn.bytes) bytes at offset \(torn.offset) of \(torn.segment): \(what)"
                : "found \(torn.bytes) bytes at offset \(torn.offset) of \(torn.segment) that the next writing open cuts: \(what)")
        }
        for hole in report.powerCutHoles {
            let what = "records \(hole.records.lowerBound)..<\(hole.records.upperBound) of \(hole.segment) lost to a power cut (never synced)"
            lines.append(report.repaired ? "found \(what); moved the blocks after them to \(hole.movedTo)"
                                         : "found \(what): the next writing open moves the blocks after them to \(hole.movedTo)")
        }
        for damage in report.corruptions { lines.append("found \(damage)") }
        for name in report.setAsideSegments {
            lines.append(report.repaired
                ? "set aside \(name) as \(name).misfit: it does not fit the log's sequence (it would have reused stored seqs)"
                : "found \(name), which does not fit the log's sequence: the next writing open sets it aside as \(name).misfit")
        }
        for name in report.resetConsumers {
            lines.append(report.repaired
                ? "reset consumer \(name): its offset file was unreadable; it restarts at the oldest stored record"
                : "found consumer \(name)'s offset file unreadable: the next writing open resets it to the oldest stored record")
        }
        return lines
    }
}

/// A consumer a command opened (``LogDirectory/openConsumer(_:creating:beside:checkNew:)``),
/// and how to let it go: close the log it opened, or release the committer beside the writer.
struct OpenConsumer: Sendable {
    let consumer: any LogConsumer
    /// Closes what was opened; the error of a log that could not write everything it had.
    let close: @Sendable () throws -> Void
}

/// The logger for command-line tools: warnings and errors on standard error, or more with SPOOL_LOG_LEVEL.
func commandLogger(_ label: String = "spool") -> Logger {
    var logger = Logger(label: label) { StreamLogHandler.standardError(label: $0) }
    logger.logLevel = ProcessInfo.processInfo.environment["SPOOL_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .warning
    return logger
}

extension Durability: ExpressibleByArgument {}

/// Writes to standard output without Foundation's buffering surprises: one `write` per call.
enum Output {
    /// - Throws: `.io` (`.diskFull` for ENOSPC) if standard output refuses the bytes: a command
    ///   that commits what it printed must not commit what never got out.
    static func write(_ text: String) throws {
        var text = text
        try text.withUTF8 { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = Foundation.write(1, buffer.baseAddress! + offset, buffer.count - offset)
                if n <= 0 {
                    if n < 0 && errno == EINTR { continue }
                    throw SpoolError.standardOutput(errno: n < 0 ? errno : EIO)
                }
                offset += n
            }
        }
    }

    /// `fsync`s standard output when it is a regular file, so that what was printed is durable
    /// before a commit says it was delivered. Pipes and terminals need nothing.
    static func sync() throws {
        var info = stat()
        guard fstat(1, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return }
        guard fsync(1) == 0 else { throw SpoolError.standardOutput(errno: errno) }
    }

    static func error(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }
}

extension SpoolError {
    static func standardOutput(errno code: Int32) -> SpoolError {
        let errno = Errno(rawValue: code)
        return SpoolError(errno == .noSpace ? .diskFull : .io, "writing standard output failed", errno: errno)
    }
}

/// Makes `root` a scratch directory of `command`: created (0700) if missing, and marked. An
/// existing directory is taken only when it is empty or an earlier run of the same command
/// marked it, so that the entries the command deletes and remakes are never someone else's.
func claimScratchDirectory(_ root: String, for command: String) throws {
    let marker = root + "/.spool-" + command
    let fileManager = FileManager.default
    // A directory someone else made (another local user who guessed the name, with a marker
    // and a planted link inside) is refused: its entries are about to be deleted and written.
    var info = stat()
    if lstat(root, &info) == 0 {
        if (info.st_mode & S_IFMT) == S_IFLNK {
            throw ValidationError("--dir \(root) is a symbolic link; give the directory itself")
        }
        if info.st_uid != geteuid() {
            throw ValidationError("--dir \(root) belongs to another user (uid \(info.st_uid)); give a directory of your own")
        }
        if info.st_mode & 0o022 != 0 {
            throw ValidationError("--dir \(root) is writable by other users; give a private directory (chmod 700)")
        }
    }
    var isDirectory: ObjCBool = false
    if fileManager.fileExists(atPath: root, isDirectory: &isDirectory), !isDirectory.boolValue {
        throw ValidationError("--dir \(root) is not a directory; give a new or empty directory")
    }
    let entries = (try? fileManager.contentsOfDirectory(atPath: root)) ?? []
    if !entries.isEmpty && !fileManager.fileExists(atPath: marker) {
        throw ValidationError("--dir \(root) already holds files that spool \(command) did not make; give a new or empty directory")
    }
    try fileManager.createDirectory(atPath: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    if !fileManager.fileExists(atPath: marker) {
        guard fileManager.createFile(atPath: marker, contents: Data("made by spool \(command); its entries may be deleted by the next run\n".utf8),
                                     attributes: [.posixPermissions: 0o600]) else {
            throw SpoolError(.io, "cannot create \(marker)", path: marker)
        }
    }
}

/// A new directory `<tmp>/<prefix>-XXXXXX` made by `mkdtemp(3)`: a name no one can guess or
/// create first, mode 0700, owned by this user.
func makePrivateDirectory(prefix: String) throws -> String {
    var template = Array((NSTemporaryDirectory() + prefix + "-XXXXXX").utf8CString)
    guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
        throw SpoolError(.io, "cannot create a private temporary directory (mkdtemp: errno \(errno))", path: NSTemporaryDirectory())
    }
    return String(cString: made)
}

/// `text` as it is if it holds no control character (a tab aside), else quoted with its
/// control characters escaped (`"a\u{1B}b"`): names found on disk are printed this way.
/// (`String(reflecting:)` is not enough: it leaves C1 controls such as U+009B, a CSI, as they are.)
func terminalSafe(_ text: String) -> String {
    guard text.unicodeScalars.contains(where: isControl) else { return text }
    var quoted = "\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"", "\\": quoted += "\\" + String(scalar)
        case _ where isControl(scalar): quoted += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
        default: quoted.unicodeScalars.append(scalar)
        }
    }
    return quoted + "\""
}

/// Whether `scalar` is a C0 control other than tab, DEL, a C1 control, or the line or
/// paragraph separator (U+2028, U+2029), which break a line as a newline does.
private func isControl(_ scalar: Unicode.Scalar) -> Bool {
    (scalar.value < 0x20 && scalar != "\t") || (0x7F...0x9F).contains(scalar.value)
        || scalar.value == 0x2028 || scalar.value == 0x2029
}

/// A payload as one line: the text if it is UTF-8 without control characters (a tab aside;
/// U+2028 and U+2029 count as controls), else `base64:` and its base64. Line breaks would
/// split the record, and escape sequences from a payload must never reach the terminal
/// reading the dump.
func printable(_ payload: [UInt8]) -> String {
    if let text = String(validating: payload, as: UTF8.self), !text.hasPrefix("base64:"),
       !text.unicodeScalars.contains(where: isControl) {
        return text
    }
    return "base64:" + Data(payload).base64EncodedString()
}

/// A group's report in text: each writer's name on a line, then its log's lines indented.
/// A writer log of a group that a command could not open or read, and why: `stat`, `verify`
/// and `sync --group` list it and go on with the others.
struct UnopenedWriter: Encodable {
    var writer: String
    var error: String
    /// Whether what stopped it is damage (``SpoolError`` `.corrupt`) rather than a failure to look.
    var corrupt: Bool { cause.map { ($0 as? SpoolError)?.code == .corrupt } ?? false }
    private var cause: (any Error)?

    enum CodingKeys: String, CodingKey { case writer, error }

    init(writer: String, error: String) {
        self.writer = writer
        self.error = error
    }

    init(writer: String, cause: any Error) {
        self.init(writer: writer, error: (cause as? ValidationError)?.message ?? "\(cause)")
        self.cause = cause
    }
}

/// `body` of each writer log of a group, in order: one that throws is listed with its reason,
/// and every other one is still read.
func eachWriterLog<T>(_ writers: [(name: String, log: LogDirectory)],
                      _ body: (_ name: String, _ log: LogDirectory) throws -> T) -> (read: [T], unopened: [UnopenedWriter]) {
    var read = [T]()
    var unopened = [UnopenedWriter]()
    for writer in writers {
        do {
            read.append(try body(writer.name, writer.log))
        } catch {
            unopened.append(UnopenedWriter(writer: writer.name, cause: error))
        }
    }
    return (read, unopened)
}

func writerSections(_ writers: [(name: String, lines: [String])]) -> [String] {
    writers.flatMap { ["writer \($0.name)"] + $0.lines.map { "  " + $0 } }
}

/// Formats a byte count for people.
func formatBytes(_ bytes: Int64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"]
    var value = Double(bytes)
    var unit = 0
    while value >= 1024 && unit < units.count - 1 {
        value /= 1024
        unit += 1
    }
    return unit == 0 ? "\(bytes) B" : String(format: "%.1f %@", value, units[unit])
}
