import Crypto
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Logging
import Spool
import Synchronization

/// The bearer tokens a collector accepts (``CollectorConfiguration/authTokenFile``), re-read
/// when the file changes and on demand.
///
/// Only the SHA-256 of each token is kept; a presented token is hashed and compared with every
/// one of them, each byte of each, so the time taken depends on the number of tokens, never on
/// how much of a token matched. No token appears in a log or an error: a bad line is named by
/// its number.
///
/// Thread safety: ``authorizes(_:)`` may be called from any task (one lock, no I/O); reading
/// the file happens on its own serial queue, never on the cooperative pool.
final class TokenFile: Sendable {
    let path: String
    private let digests = Mutex<[[UInt8]]>([])
    /// What the file looked like when it was last read: a change of any of it means a re-read.
    private let signature = Mutex<[Int64]?>(nil)
    private let queue = DispatchQueue(label: "spool.collector.tokens")
    private let timer = Mutex<Timer?>(nil)
    private let logger: Logger

    /// The check timer: a dispatch source, whose methods may be called from any thread.
    private struct Timer: @unchecked Sendable {
        let source: any DispatchSourceTimer
    }

    init(path: String, logger: Logger) {
        self.path = path
        self.logger = logger
    }

    /// Reads the file and puts its tokens in force. Blocking: call it off the cooperative pool.
    /// - Returns: how many tokens the file holds (at least one).
    /// - Throws: ``SpoolError`` `.io` when the file cannot be read, `.invalidConfiguration`
    ///   naming the line of a token with characters a bearer token cannot hold, or when the
    ///   file holds no token: every request would be refused, and an empty file is most often
    ///   one being rewritten in place (`echo new > tokens` truncates it first). The tokens in
    ///   force stay.
    @discardableResult
    func load() throws -> Int {
        let seen = Self.signature(of: path)
        guard let data = FileManager.default.contents(atPath: path) else {
            throw SpoolError(.io, "the token file cannot be read", path: path)
        }
        let tokens = try Self.parse(String(decoding: data, as: UTF8.self), path: path)
        guard !tokens.isEmpty else {
            throw SpoolError(.invalidConfiguration, "the token file holds no token: every request would be refused", path: path)
        }
        digests.withLock { $0 = tokens.map { Array(SHA256.hash(data: Array($0.utf8))) } }
        signature.withLock { $0 = seen }
        return tokens.count
    }

    /// Reads the file on the token queue (see ``load()``).
    func reload() async throws -> Int {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try self.load() }) }
        }
    }

    /// Checks the file every `interval` and re-reads it when it changed; a re-read that fails
    /// (a file that cannot be read, a bad line, no token at all) is logged as a warning, once
    /// per change (without the file's contents), and keeps the tokens in force.
    func watch(every interval: Duration) {
        let source = DispatchSource.makeTimerSource(queue: queue)
        let nanoseconds = Int(interval.components.seconds) * 1_000_000_000 + Int(interval.components.attoseconds / 1_000_000_000)
        source.schedule(deadline: .now() + .nanoseconds(nanoseconds), repeating: .nanoseconds(nanoseconds))
        source.setEventHandler { [self] in
            let now = Self.signature(of: path)
            guard now != signature.withLock({ $0 }) else { return }
            do {
                let count = try load()
                logger.info("token file changed: re-read", metadata: ["path": "\(path)", "tokens": "\(count)"])
            } catch {
                signature.withLock { $0 = now }  // one warning per change, not one per check
                logger.warning("token file changed but could not be re-read; the tokens in force stay", metadata: ["path": "\(path)", "error": "\(error)"])
            }
        }
        source.resume()
        timer.withLock { $0 = Timer(source: source) }
    }

    /// Stops checking the file.
    func stopWatching() {
        timer.withLock { timer in
            timer?.source.cancel()
            timer = nil
        }
    }

    /// Whether an `Authorization` header value is `Bearer <a token in force>` (the scheme in
    /// any case). Constant time in the token's bytes.
    func authorizes(_ authorization: String?) -> Bool {
        guard let authorization else { return false }
        let parts = authorization.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return false }
        let presented = Array(SHA256.hash(data: Array(parts[1].trimmingCharacters(in: .whitespaces).utf8)))
        var matched: UInt8 = 0
        for digest in digests.withLock({ $0 }) {
            var difference: UInt8 = 0
            for index in 0..<digest.count { difference |= digest[index] ^ presented[index] }
            matched |= difference == 0 ? 1 : 0
        }
        return matched == 1
    }

    /// The tokens of a token file: one per line, `#` to the end of a line a comment, spaces
    /// around a token ignored, blank lines skipped. A token holds only the characters of an
    /// RFC 6750 `b64token` (letters, digits, `-._~+/`, then `=`s).
    static func parse(_ text: String, path: String) throws -> [String] {
        var tokens: [String] = []
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let content = line.prefix { $0 != "#" }.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !content.isEmpty else { continue }
            guard isBearerToken(content) else {
                throw SpoolError(.invalidConfiguration, "line \(index + 1) of the token file is not one bearer token (letters, digits, -._~+/ and trailing =)", path: path)
            }
            tokens.append(content)
        }
        return tokens
    }

    private static func isBearerToken(_ token: String) -> Bool {
        let bytes = Array(token.utf8)
        let body = bytes.reversed().drop { $0 == UInt8(ascii: "=") }
        guard !body.isEmpty else { return false }
        return body.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
            default: "-._~+/".utf8.contains(byte)
            }
        }
    }

    /// The file's device, inode, size, and change and modification times (ns), following a
    /// link (a Kubernetes secret is a link that is swapped); nil when it cannot be looked at.
    private static func signature(of path: String) -> [Int64]? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        #if canImport(Darwin)
        let (modified, changed) = (info.st_mtimespec, info.st_ctimespec)
        #else
        let (modified, changed) = (info.st_mtim, info.st_ctim)
        #endif
        return [Int64(info.st_dev), Int64(info.st_ino), Int64(info.st_size),
                Int64(modified.tv_sec) * 1_000_000_000 + Int64(modified.tv_nsec),
                Int64(changed.tv_sec) * 1_000_000_000 + Int64(changed.tv_nsec)]
    }
}
