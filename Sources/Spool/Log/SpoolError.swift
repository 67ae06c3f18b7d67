import SystemPackage

/// The one error type Spool throws.
///
/// `code` says what kind of failure it is (compare it with the static members of
/// ``SpoolError/Code``); `message` says what and where, in words a person can act on
/// (the file, the offset, what was expected and what was found); `path` names the
/// file or directory involved, and `errno` the system error underneath, if any.
/// Payloads never appear in an error.
public struct SpoolError: Error, Sendable, CustomStringConvertible {
    /// The kind of failure: an extensible set, compared with `==`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Kind: String, Sendable {
            case invalidConfiguration, recordTooLarge, locked, io, diskFull, corrupt
            case full, closed, failed, invalidConsumerName, invalidCommit, unsupportedVersion
            case missingDictionary, missingKey, authenticationFailed, invalidArgument, suspended
        }
        private let kind: Kind
        private init(_ kind: Kind) { self.kind = kind }

        /// A configuration value is out of range; the message names the field.
        public static let invalidConfiguration = Code(.invalidConfiguration)
        /// A record is larger than `Configuration.maxRecordSize`.
        public static let recordTooLarge = Code(.recordTooLarge)
        /// Another `EventLog` (in this process or another) holds the directory's lock.
        public static let locked = Code(.locked)
        /// A system call failed; `errno` says why.
        public static let io = Code(.io)
        /// The file system is full (`ENOSPC`, `EDQUOT` or `EFBIG`). Records already stored stay readable;
        /// appending works again once space returns. An append or wait that fails with it names
        /// its record's ``SpoolError/seq``: the record stays queued and is written once the
        /// writer's retry succeeds, so wait for it again rather than appending it twice.
        public static let diskFull = Code(.diskFull)
        /// Stored bytes failed a check (magic, checksum, bounds); the message names the file and offset.
        public static let corrupt = Code(.corrupt)
        /// The log reached `Configuration.maxBytes` under the `rejectNew` policy, or (in theory)
        /// took the last seq the format allows (2^62 − 1).
        public static let full = Code(.full)
        /// The log was closed.
        public static let closed = Code(.closed)
        /// An earlier `fsync` failed: the data it covered cannot be trusted, so the log refuses
        /// further writes until it is reopened (which re-checks the files).
        public static let failed = Code(.failed)
        /// A consumer name is empty, too long, or uses characters outside `[A-Za-z0-9._-]`.
        public static let invalidConsumerName = Code(.invalidConsumerName)
        /// A commit goes backwards, or past the last appended record.
        public static let invalidCommit = Code(.invalidCommit)
        /// A file was written by a newer format version than this reader knows.
        public static let unsupportedVersion = Code(.unsupportedVersion)
        /// A block names a zstd dictionary that is not available.
        public static let missingDictionary = Code(.missingDictionary)
        /// A block is encrypted with a key that was not supplied.
        public static let missingKey = Code(.missingKey)
        /// An encrypted block failed authentication (tampered, or the wrong key).
        public static let authenticationFailed = Code(.authenticationFailed)
        /// An argument is out of its documented range.
        public static let invalidArgument = Code(.invalidArgument)
        /// The log is suspended (``EventLog/suspend()``): it holds no lock and no file, and
        /// takes appends again after ``EventLog/resume()``.
        public static let suspended = Code(.suspended)

        /// The code's name, such as `diskFull`.
        public var description: String { kind.rawValue }
    }

    /// What kind of failure this is.
    public var code: Code
    /// What went wrong and where, for a person.
    public var message: String
    /// The file or directory involved, if any.
    public var path: String?
    /// The system error underneath, if any.
    public var errno: Errno?
    /// For an error thrown to an `append(_:durability:)` or a wait: the seq of the record
    /// waited for. After `.diskFull` or `.io` (the writer retries) the record is still queued
    /// under this seq: wait for it again, ``EventLog/waitUntil(before:is:)`` `seq + 1` (the wait ends at the writer's
    /// next attempt) instead of appending a duplicate. After `.failed` it may be in the file
    /// already (an `fdatasync` failed after the write): reopen and read the log to know. After
    /// `.closed` it was not written, and `close()` counted it as lost.
    public var seq: UInt64?

    /// An error of `code` with a message that says what and where (never a payload).
    public init(_ code: Code, _ message: String, path: String? = nil, errno: Errno? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.errno = errno
    }

    /// `code: message (path: …) [errno]`.
    public var description: String {
        var text = "\(code): \(message)"
        if let path { text += " (path: \(path))" }
        if let errno { text += " [\(errno)]" }
        if let seq { text += " (record \(seq))" }
        return text
    }
}

extension SpoolError {
    /// Wraps a failed system call, mapping "no space" errors to `.diskFull`.
    static func system(_ operation: String, path: String?, _ errno: Errno) -> SpoolError {
        let code: Code = (errno == .noSpace || errno == .diskQuotaExceeded || errno == .fileTooLarge) ? .diskFull : .io
        return SpoolError(code, "\(operation) failed", path: path, errno: errno)
    }

    /// A symbolic link where the log keeps a file or directory of its own: refused, never
    /// followed, so nothing outside the log's directory is read, cut or written.
    static func symbolicLink(_ path: String) -> SpoolError {
        SpoolError(.io, "is a symbolic link (Spool never follows links inside a log's directory; move it aside)", path: path)
    }
}
