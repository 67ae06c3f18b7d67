import ArgumentParser
import Dispatch
import Foundation
import Logging
import Spool

/// The log directory argument every command that works on a log takes.
struct LogDirectory: ParsableArguments {
    @Argument(help: "The log's directory.")
    var directory: String

    @Option(help: ArgumentHelp("Read encrypted blocks with the keys in this file.",
                               discussion: "One key per line: '<key id> <64 hex digits>'; '#' starts a comment. New blocks are not encrypted."))
    var keyFile: String?

    /// Opens the log, applying the library's recovery rules (a torn tail is cut and reported),
    /// with the keys of `--key-file` for reading.
    func open(_ configuration: Configuration = Configuration()) throws -> EventLog {
        var configuration = configuration
        if let keyFile {
            guard let text = try? String(contentsOfFile: keyFile, encoding: .utf8) else {
                throw ValidationError("cannot read the key file \(keyFile)")
            }
            let keys = try Configuration.Encryption.parseKeyFile(text)
            configuration.encryption = .init(keys: keys.merging(configuration.encryption?.keys ?? [:]) { $1 },
                                             current: configuration.encryption?.current)
        }
        return try EventLog.open(directory: directory, configuration: configuration, logger: commandLogger())
    }
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
    static func write(_ text: String) {
        var text = text
        text.withUTF8 { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = Foundation.write(1, buffer.baseAddress! + offset, buffer.count - offset)
                if n <= 0 { if errno == EINTR { continue } else { return } }
                offset += n
            }
        }
    }

    static func error(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }
}

/// A payload as one line: the text if it is single-line UTF-8, else `base64:` and its base64.
func printable(_ payload: [UInt8]) -> String {
    if let text = String(validating: payload, as: UTF8.self), !text.contains("\n"), !text.contains("\r"), !text.hasPrefix("base64:") {
        return text
    }
    return "base64:" + Data(payload).base64EncodedString()
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

/// Runs blocking file I/O (opening a log or a consumer, directory changes, summaries, close)
/// on a Dispatch thread, off the cooperative pool, whose few threads must never block.
func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
    }
}
