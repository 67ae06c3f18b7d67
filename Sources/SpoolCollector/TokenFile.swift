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
/// The file is read whole and put in force only when every line is good: a last line without
/// its newline (a file still being written in place), a token shorter than
/// ``minimumLength`` bytes, or an empty file keeps the tokens in force. The only way to revoke
/// every token is a file whose only token line is ``revokeAllMarker``. A file readable or
/// writable by its group or others is warned about at every read (``FileSafety``).
///
/// A line may bind its token to log ids (``TokenGrant``): `<token> <log id> <log id>…`.
///
/// Thread safety: ``grant(_:)`` may be called from any task (one lock, no I/O); reading
/// the file happens on its own serial queue, never on the cooperative pool.
final class TokenFile: Sendable {
    let path: String
    private let digests = Mutex<[(digest: [UInt8], grant: TokenGrant)]>([])
    /// What the file looked like when it was last read: a change of any of it means a re-read.
    private let signature = Mutex<[Int64]?>(nil)
    private let queue = DispatchQueue(label: "spool.collector.tokens")
    private let timer = Mutex<Timer?>(nil)
    private let logger: Logger
    /// Whether a file others may read or write is refused rather than warned about.
    private let strictPermissions: Bool

    /// The fewest bytes a token may have: 16 (96 bits of base64), so that no token can be
    /// guessed by trying every short one.
    static let minimumLength = 16
    /// The line that, alone in the file, revokes every token: `!revoke-all` (`!` is not a
    /// character of a bearer token, so no token reads as it).
    static let revokeAllMarker = "!revoke-all"

    /// One line's token and what it may write.
    struct Token: Equatable {
        var token: String
        var grant: TokenGrant = .anyLog
    }

    /// What a token file says.
    enum Contents: Equatable {
        /// These tokens are accepted (at least one), each with what it may write.
        case tokens([Token])
        /// No token is accepted: the file holds ``revokeAllMarker``.
        case revokeAll
    }

    /// The check timer: a dispatch source, whose methods may be called from any thread.
    private struct Timer: @unchecked Sendable {
        let source: any DispatchSourceTimer
    }

    init(path: String, strictPermissions: Bool = false, logger: Logger) {
        self.path = path
        self.strictPermissions = strictPermissions
        self.logger = logger
    }

    /// Reads the file and puts its tokens in force (none for ``revokeAllMarker``, logged as a
    /// warning), warning first when others may read or write it. Blocking: call it off the
    /// cooperative pool.
    /// - Returns: how many tokens are now in force (0 when the file revokes all).
    /// - Throws: ``SpoolError`` `.io` when the file cannot be read, `.invalidConfiguration`
    ///   naming the line of a token with characters a bearer token cannot hold, of a token
    ///   shorter than ``minimumLength``, of a last line without its newline (the file is being
    ///   written), of ``revokeAllMarker`` beside tokens; when the file holds no token (an empty
    ///   file is most often one being rewritten in place: `echo new > tokens` truncates it
    ///   first); or when others may read or write it with `strictPermissions`. The tokens in
    ///   force stay.
    @discardableResult
    func load() throws -> Int {
        let seen = Self.signature(of: path)
        for problem in try FileSafety.checkTokenFile(path, strict: strictPermissions) {
            logger.warning("\(problem)")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw SpoolError(.io, "the token file cannot be read", path: path)
        }
        let tokens: [Token]
        switch try Self.parse(String(decoding: data, as: UTF8.self), path: path) {
        case .tokens(let found):
            tokens = found
        case .revokeAll:
            tokens = []
            logger.warning("every token is revoked (\(Self.revokeAllMarker)): every POST is answered 401", metadata: ["path": "\(path)"])
        }
        digests.withLock { $0 = tokens.map { (Array(SHA256.hash(data: Array($0.token.utf8))), $0.grant) } }
        signature.withLock { $0 = seen }
        return tokens.count
    }

    /// Reads the file on the token queue (see ``load()``).
    func reload() async throws -> Int {
        try await offload(on: queue) { try self.load() }
    }

    /// Checks the file every `interval` and re-reads it when it changed; a re-read that fails
    /// (a file that cannot be read, a bad line, a last line without its newline, no token at
    /// all) is logged as a warning, once per change (without the file's contents), and keeps
    /// the tokens in force.
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

    /// What the token of an `Authorization` header value (`Bearer <token>`, the scheme in
    /// any case) may write; nil when it is no token in force. Constant time in the token's
    /// bytes: every byte of every token's digest is compared, whichever matches.
    func grant(_ authorization: String?) -> TokenGrant? {
        guard let authorization else { return nil }
        let parts = authorization.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let presented = Array(SHA256.hash(data: Array(parts[1].trimmingCharacters(in: .whitespaces).utf8)))
        var granted: TokenGrant?
        for (digest, grant) in digests.withLock({ $0 }) {
            var difference: UInt8 = 0
            for index in 0..<digest.count { difference |= digest[index] ^ presented[index] }
            if difference == 0 { granted = grant }
        }
        return granted
    }

    /// Whether an `Authorization` header value holds a token in force (``grant(_:)``).
    func authorizes(_ authorization: String?) -> Bool {
        grant(authorization) != nil
    }

    /// What a token file says: one token per line, each line ended by a newline, `#` to the
    /// end of a line a comment, spaces around a token ignored, blank lines skipped. A token
    /// holds only the characters of an RFC 6750 `b64token` (letters, digits, `-._~+/`, then
    /// `=`s), at least ``minimumLength`` of them, and may be followed, after spaces, by the
    /// log ids it may write (``TokenGrant``); ``revokeAllMarker`` alone revokes all.
    /// - Throws: ``SpoolError`` `.invalidConfiguration` naming the line (never its token) of a
    ///   bad token, of a last line without its newline, or of the marker beside tokens; or
    ///   when the file holds no token line.
    static func parse(_ text: String, path: String) throws -> Contents {
        func invalid(_ line: Int, _ why: String) -> SpoolError {
            SpoolError(.invalidConfiguration, "line \(line) of the token file \(why)", path: path)
        }
        var tokens: [Token] = []
        var marker: Int?
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        for (index, line) in lines.enumerated() {
            let content = line.prefix { $0 != "#" }.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !content.isEmpty else { continue }
            guard index < lines.count - 1 else {
                throw invalid(index + 1, "has no newline at its end: the file is still being written (every line must end with one)")
            }
            if content == revokeAllMarker {
                marker = index + 1
                continue
            }
            let words = content.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            guard isBearerToken(words[0]) else {
                throw invalid(index + 1, "is not one bearer token (letters, digits, -._~+/ and trailing =), then the log ids it may write")
            }
            guard words[0].utf8.count >= minimumLength else {
                throw invalid(index + 1, "holds a token shorter than \(minimumLength) bytes, the least a token may have")
            }
            let logs = words.dropFirst()
            guard logs.allSatisfy({ LogID(hex: $0) != nil && $0 == $0.lowercased() }) else {
                throw invalid(index + 1, "names a log id that is not 32 lowercase hex digits after its token")
            }
            tokens.append(Token(token: words[0], grant: logs.isEmpty ? .anyLog : .logs(Set(logs))))
        }
        if let marker {
            guard tokens.isEmpty else { throw invalid(marker, "is \(revokeAllMarker), which must be the file's only token line") }
            return .revokeAll
        }
        guard !tokens.isEmpty else {
            throw SpoolError(.invalidConfiguration, "the token file holds no token: every request would be refused (a file whose only line is \(revokeAllMarker) revokes every token)", path: path)
        }
        return .tokens(tokens)
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
