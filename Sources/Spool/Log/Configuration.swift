import Foundation

/// Every setting of a log, in one `Sendable` value with documented defaults.
///
/// The configuration is validated once, by ``EventLog/open(directory:configuration:logger:metricsFactory:)``;
/// an invalid value is refused with ``SpoolError/Code/invalidConfiguration`` and a
/// message that names the field.
public struct Configuration: Sendable {
    /// What the log does when a new block would take it past ``Configuration/maxBytes``.
    public enum CapPolicy: String, Sendable, CaseIterable {
        /// Delete the oldest sealed segments, even unconsumed ones; every consumer moves past
        /// them and the dropped ranges are counted and reported. The default.
        case dropOldest
        /// Refuse new appends with ``SpoolError/Code/full``; nothing stored is touched. An
        /// append is checked before its record is compressed, so records not yet written count
        /// at their uncompressed size (`dropOldest` charges each write what it stores).
        case rejectNew
    }

    /// Uncompressed bytes of records gathered into one block before it is sealed.
    /// The default is 64 KiB. Range: 1 KiB ... 16 MiB.
    public var blockSize: Int = 64 * 1024
    /// How long a partly filled block may wait for more records before it is written,
    /// when no caller waits on it. The default is 10 ms. Range: 0 ... 60 s.
    public var linger: Duration = .milliseconds(10)
    /// The zstd compression level of blocks. The default is 1. Range: zstd's own (-7 ... 22).
    public var compressionLevel: Int32 = 1
    /// How many threads may compress blocks at once when appends fill blocks faster than one
    /// core compresses them: blocks are independent, so they are sealed side by side and
    /// written in seq order. The writer's own thread is one of them; the others are lanes on
    /// Dispatch's pool, running only while filled blocks wait to be sealed. A block sealed at
    /// the linger deadline or for a waiting `written`/`synced` caller is sealed by the writer
    /// alone, at once. The default is the number of active cores, at most 4. `1` seals on the
    /// writer thread alone. Range: 1 ... 64.
    public var sealingThreads: Int = min(ProcessInfo.processInfo.activeProcessorCount, 4)
    /// How sealed segments are compressed again once they are cold, if set: see
    /// ``ColdCompression``. `ColdCompression()` rewrites each sealed segment once, at zstd
    /// level 9 in 1 MiB blocks, on a background thread: about 40% fewer bytes, so a capped log
    /// keeps that many more events, for one more write of each segment a consumer has not read
    /// by then. The default is `nil` (every segment stays as the writer wrote it: no background
    /// writes, as RocksDB's `bottommost_compression` is off unless set).
    public var coldCompression: ColdCompression? = nil
    /// A segment is rolled once it holds this many bytes. The default is 16 MiB. Range: 64 KiB ... 1 GiB.
    public var segmentSize: Int = 16 * 1024 * 1024
    /// A segment is also rolled once its first block is this old, if set. The default is `nil` (no age roll).
    public var segmentMaxAge: Duration? = nil
    /// The largest record `append` accepts. The default is 1 MiB. Range: 1 byte ... 64 MiB.
    public var maxRecordSize: Int = 1024 * 1024
    /// Appended bytes held in memory, not yet written, before `append` waits for the writer
    /// (backpressure: memory stays bounded). The default is 16 MiB; at least `2 × blockSize`.
    public var maxPendingBytes: Int = 16 * 1024 * 1024
    /// A cap on the records' bytes: every segment's data plus the pending blocks, if set.
    /// The default is `nil`.
    ///
    /// Not counted: the small fixed files beside them (`META`, `LOCK`, one 1 KiB offset file
    /// per consumer, each trained dictionary's file, each encryption key's 56-byte check file)
    /// and, in a log written `synced`, the zeros preallocated past the active segment's data
    /// (at most 1 MiB, cut when the segment is sealed or the log closed). Leave that much
    /// headroom on a volume you size exactly.
    public var maxBytes: Int? = nil
    /// What happens at the cap. The default is ``CapPolicy/dropOldest``.
    public var capPolicy: CapPolicy = .dropOldest
    /// Records older than this are expired: readers skip and count them. The default is `nil`.
    public var maxAge: Duration? = nil
    /// The longest `maxAge` accepted: 100 years (a longer one is a mistake, and its
    /// milliseconds would overflow the expiry arithmetic).
    public static let maxExpiryAge: Duration = .seconds(100 * 365 * 86_400)
    /// A calendar expiry rule (Google Analytics': a hit must arrive by 4 a.m. of the next day
    /// in the reporting time zone). The default is `nil`.
    public var reportingDeadline: ReportingDeadline? = nil
    /// Whether the log lets go of its lock and files whenever it is idle, as
    /// ``EventLog/suspend()`` does: once the writer has written and synced everything appended
    /// and no append waits, the log suspends itself (on a queue of its own), and the next
    /// append resumes it first (well under a millisecond). For a process that iOS may suspend
    /// at any moment in a shared container (an app extension, a widget): no lock is held while
    /// none of its calls is in progress, beyond the few milliseconds the writer takes to write
    /// and sync what the last call left. Every idle spell costs one `fdatasync`, and closes the
    /// log's own consumers (``EventLog/consumer(named:)``), as `suspend()` does: read such a log
    /// with a ``DetachedConsumer`` (a group's sync worker does). The default is `false` (the lock
    /// is held from open to close).
    public var suspendsWhenIdle = false
    /// Permission bits of files Spool creates. The default is `0o600` (owner only).
    public var fileMode: UInt16 = 0o600
    /// Permission bits of directories Spool creates. The default is `0o700` (owner only).
    public var directoryMode: UInt16 = 0o700
    /// Whether new blocks are compressed with a zstd dictionary (provided or trained from the
    /// log's records). The default is ``DictionaryPolicy/none``.
    public var dictionary: DictionaryPolicy = .none
    /// Encryption at rest of every new block's payload, if set. The default is `nil` (off).
    public var encryption: Encryption? = nil

    /// Every field at its documented default.
    public init() {}

    /// Checks every field, naming the first that is out of range.
    public func validate() throws {
        func fail(_ field: String, _ why: String) -> SpoolError {
            SpoolError(.invalidConfiguration, "Configuration.\(field) \(why)")
        }
        guard (1024...16 * 1024 * 1024).contains(blockSize) else {
            throw fail("blockSize", "is \(blockSize); it must be between 1 KiB and 16 MiB")
        }
        guard linger >= .zero, linger <= .seconds(60) else {
            throw fail("linger", "is \(linger); it must be between 0 and 60 seconds")
        }
        guard (-7...22).contains(compressionLevel) else {
            throw fail("compressionLevel", "is \(compressionLevel); zstd accepts -7 ... 22")
        }
        guard (1...64).contains(sealingThreads) else {
            throw fail("sealingThreads", "is \(sealingThreads); it must be between 1 and 64")
        }
        guard (64 * 1024...1024 * 1024 * 1024).contains(segmentSize) else {
            throw fail("segmentSize", "is \(segmentSize); it must be between 64 KiB and 1 GiB")
        }
        if let age = segmentMaxAge, age <= .zero {
            throw fail("segmentMaxAge", "is \(age); it must be positive or nil")
        }
        guard (1...64 * 1024 * 1024).contains(maxRecordSize) else {
            throw fail("maxRecordSize", "is \(maxRecordSize); it must be between 1 byte and 64 MiB")
        }
        guard maxPendingBytes >= 2 * blockSize, maxPendingBytes >= 2 * maxRecordSize else {
            throw fail("maxPendingBytes", "is \(maxPendingBytes); it must be at least twice blockSize and twice maxRecordSize")
        }
        if let cap = maxBytes, cap < 2 * segmentSize {
            throw fail("maxBytes", "is \(cap); it must be at least twice segmentSize (\(segmentSize))")
        }
        if let age = maxAge, age <= .zero || age > Self.maxExpiryAge {
            throw fail("maxAge", "is \(age); it must be positive and at most 100 years (\(Self.maxExpiryAge)), or nil")
        }
        if let deadline = reportingDeadline {
            guard (0...23).contains(deadline.hour) else {
                throw fail("reportingDeadline.hour", "is \(deadline.hour); it must be between 0 and 23")
            }
            guard (-ReportingDeadline.maxUTCOffsetSeconds...ReportingDeadline.maxUTCOffsetSeconds).contains(deadline.utcOffsetSeconds) else {
                throw fail("reportingDeadline.utcOffsetSeconds", "is \(deadline.utcOffsetSeconds); it must be between -64800 and 64800 (±18 hours, in seconds)")
            }
        }
        guard fileMode <= 0o777 else { throw fail("fileMode", "is \(String(fileMode, radix: 8)); it must be at most 0777") }
        guard directoryMode <= 0o777 else { throw fail("directoryMode", "is \(String(directoryMode, radix: 8)); it must be at most 0777") }
        if let cold = coldCompression {
            guard (1...22).contains(cold.level) else {
                throw fail("coldCompression.level", "is \(cold.level); it must be between 1 and 22")
            }
            guard (64 * 1024...16 * 1024 * 1024).contains(cold.blockSize) else {
                throw fail("coldCompression.blockSize", "is \(cold.blockSize); it must be between 64 KiB and 16 MiB")
            }
        }
        try validateCodec(fail)
    }
}

/// Cold recompression, RocksDB's bottommost compression for a log: a sealed segment is never
/// appended to again, so a background thread rewrites it once in larger blocks at a higher
/// zstd level than the hot path can afford (FORMAT.md §2.1). Every record keeps its seq,
/// timestamp and bytes; the rewritten file replaces the old one atomically (a temporary file,
/// `fdatasync`, `rename`, directory `fsync`), so a crash at any point leaves one valid copy.
///
/// What it never does:
/// - slow appends: it runs on a thread of its own at the lowest scheduling priority (`nice` 19);
/// - change what a reader reads: a reader inside the segment keeps reading the file it opened;
/// - take the log past ``Configuration/maxBytes``: the cap counts the file being written, and
///   the rewrite of a segment the cap must drop is abandoned instead;
/// - rewrite a segment every consumer has passed (retention deletes it), a damaged one
///   (recovery's evidence is kept), one it would not make smaller, or any segment of a log that
///   suspends when idle (``Configuration/suspendsWhenIdle``).
///
/// Its work is counted in ``LogStats/segmentsRecompressed`` and
/// ``LogStats/bytesSavedByRecompression``; `EventLog.recompressSealedSegments()` does it at
/// once, on the caller's thread.
public struct ColdCompression: Sendable, Hashable {
    /// The zstd level of rewritten blocks. The default is 9. Range: 1 ... 22.
    public var level: Int32
    /// Uncompressed bytes of records in one rewritten block. The default is 1 MiB.
    /// Range: 64 KiB ... 16 MiB.
    public var blockSize: Int
    /// Whether a background thread rewrites segments as rolls seal them (and those found
    /// at open). `false`: only `EventLog.recompressSealedSegments()` does, when the app
    /// chooses (going to the background, charging). The default is `true`.
    public var inBackground: Bool

    /// Level 9 in 1 MiB blocks, in the background, unless said otherwise: on the benchmark's
    /// events, a log of 1 MiB segments takes 22.5 bytes per event against 34.0 as written
    /// (level 1 in 64 KiB blocks; Benchmarks/README, "Cold recompression"). Level 15 takes
    /// 20.0, for 3.5 times the rewrite's time: for a log whose segments stay cold long on a
    /// device where the bytes matter more than the background thread's time.
    public init(level: Int32 = 9, blockSize: Int = 1024 * 1024, inBackground: Bool = true) {
        self.level = level
        self.blockSize = blockSize
        self.inBackground = inBackground
    }
}

/// Google Analytics' calendar rule: a record appended on day D (in `timeZone`) expires at
/// `hour` o'clock on day D + 1.
public struct ReportingDeadline: Sendable, Hashable {
    /// The hour of the next day at which records expire. 0 ... 23.
    public var hour: Int
    /// The time zone of the reporting view, as a fixed offset from UTC in seconds.
    public var utcOffsetSeconds: Int

    /// Records expire at `hour` o'clock of the day after they were appended, in the time zone
    /// `utcOffsetSeconds` from UTC.
    public init(hour: Int, utcOffsetSeconds: Int) {
        self.hour = hour
        self.utcOffsetSeconds = utcOffsetSeconds
    }

    /// The widest offset from UTC a time zone has: ±18 hours, in seconds.
    public static let maxUTCOffsetSeconds = 18 * 3600

    /// The instant (ms since the epoch) at which a record stamped `timestamp` expires.
    /// `hour` and `utcOffsetSeconds` are as `Configuration.validate()` accepts them; a
    /// timestamp (read from a file: any value) is first clamped to ±2^60 ms (36 million years),
    /// so the arithmetic cannot overflow.
    public func expiry(ofRecordAt timestamp: Int64) -> Int64 {
        let offset = Int64(max(-Self.maxUTCOffsetSeconds, min(Self.maxUTCOffsetSeconds, utcOffsetSeconds))) * 1000
        let day: Int64 = 86_400_000
        let bound: Int64 = 1 << 60
        let local = max(-bound, min(bound, timestamp)) + offset
        let startOfDay = local >= 0 ? (local / day) * day : ((local - day + 1) / day) * day
        return startOfDay + day + Int64(max(0, min(23, hour))) * 3_600_000 - offset
    }
}
