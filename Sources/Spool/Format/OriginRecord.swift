#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Crypto

/// A record a collector received from a device, as a collector log stores it.
///
/// A collector that writes a Spool log (`spool collector --log DIR`) stores each record it
/// accepts as one log record whose payload is ``encoded()``: the device log's id, the record's
/// seq there, its time and its exact bytes. Whatever forwards that log (`spool sync`, a sink)
/// decodes it with ``decode(_:)`` and sends ``id``, the device's own id, never the collector
/// log's, so a record keeps one identity from the device to its destination, through any
/// number of collectors.
///
/// The stored bytes (FORMAT.md §11; all integers little-endian):
///
/// ```
/// 0: version u8 (1) | 1: flags u8 (bit 0: time present; bit 1: conflict; no other bit is defined)
/// 2: origin log id [16] | 18: origin seq u64 (below 2^62) | 26: time i64 (0 when absent)
/// 34: payload length u32 | 38: payload [length], the record's last byte
/// ```
///
/// A log holds origin records when its directory holds the marker file `ORIGINS`
/// (``markerFileName``), written once by ``markStoresOrigins(_:)`` before the first record;
/// ``storesOrigins(at:)`` checks for it. (Both constants live here, not in the `Format` enum,
/// so the type stays one file.)
///
/// Thread safety: a value type; use freely from any thread.
public struct OriginRecord: Sendable, Hashable {
    /// The device log's id.
    public var log: LogID
    /// The record's seq in the device log.
    public var seq: UInt64
    /// Milliseconds since 1970 from the envelope the record arrived in; `nil` when the
    /// encoding carried none (a raw body).
    public var time: Int64?
    /// The record's exact bytes: its JSON text as received (the whitespace between tokens
    /// removed by the collector), or the bytes of a record sent base64-encoded.
    public var payload: [UInt8]
    /// Whether the record is a **conflict**: it arrived under an id (log id and seq) the
    /// collector had already stored with other bytes (two devices restored from one backup, or
    /// a client sending another device's ids first). It is stored, never dropped, under an id
    /// of its own (``id``), so a destination that keys on the id keeps both.
    public var conflict: Bool

    /// The origin id every sink sends: `"<device log id>-<seq>"`, or for a ``conflict``
    /// `"<device log id>-<seq>~<digest>"` (``eventID(log:seq:payload:conflict:)``).
    public var id: String { Self.eventID(log: log, seq: seq, payload: payload, conflict: conflict) }

    /// An origin record. Nothing is checked here; ``encoded()`` traps on a seq at or past the
    /// format's ceiling (2^62) or a payload of 4 GiB or more (programmer errors: no device log
    /// holds such a record).
    public init(log: LogID, seq: UInt64, time: Int64?, payload: [UInt8], conflict: Bool = false) {
        self.log = log
        self.seq = seq
        self.time = time
        self.payload = payload
        self.conflict = conflict
    }

    /// The digest of a record's bytes that tells two records of one id apart: the first 8
    /// bytes of their SHA-256, big-endian. A collector keeps it with each id it stored, so a
    /// repeat is a duplicate only when it is the same bytes.
    ///
    /// - Complexity: O(payload size).
    public static func digest(of payload: [UInt8]) -> UInt64 {
        SHA256.hash(data: payload).prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The id a record is sent under: `"<log>-<seq>"`, and for a conflict
    /// `"<log>-<seq>~<16 lowercase hex digits of digest(of: payload)>"`: the same bytes under
    /// the same id always get the same conflict id, at every hop.
    public static func eventID(log: LogID, seq: UInt64, payload: [UInt8], conflict: Bool) -> String {
        log.eventID(seq: seq) + (conflict ? conflictSuffix(digest: digest(of: payload)) : "")
    }

    /// What a conflict's id adds to `"<log>-<seq>"`: `~` and the 16 lowercase hex digits of
    /// the digest of its bytes (``digest(of:)``).
    public static func conflictSuffix(digest: UInt64) -> String {
        let hex = String(digest, radix: 16)
        return "~" + String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// The bytes of the header before the payload.
    public static let headerSize = 38
    /// Every origin seq is below this: 2^62, the seq ceiling of every Spool log (FORMAT.md §1).
    public static var seqLimit: UInt64 { Format.seqCeiling }
    /// The version ``encoded()`` writes and the only one ``decode(_:)`` reads.
    static let version: UInt8 = 1
    /// Flags bit 0: the time field holds a time.
    static let flagTime: UInt8 = 1
    /// Flags bit 1: the record is a ``conflict``.
    static let flagConflict: UInt8 = 2

    /// The stored bytes of one collector-log record: the header, then the payload.
    ///
    /// - Complexity: O(payload size).
    public func encoded() -> [UInt8] {
        precondition(seq < Format.seqCeiling, "an origin seq is below 2^62")
        precondition(payload.count <= Int(UInt32.max), "an origin payload is below 4 GiB")
        var bytes = [UInt8]()
        bytes.reserveCapacity(Self.headerSize + payload.count)
        bytes.append(Self.version)
        bytes.append((time == nil ? 0 : Self.flagTime) | (conflict ? Self.flagConflict : 0))
        log.append(to: &bytes)
        bytes.appendLE(seq)
        bytes.appendLE(time ?? 0)
        bytes.appendLE(UInt32(payload.count))
        bytes.append(contentsOf: payload)
        return bytes
    }

    /// Reads the stored bytes of one collector-log record.
    ///
    /// Every field is bounds-checked: the length must be exactly the bytes that follow the
    /// header, the seq below the format's ceiling, undefined flag bits and a time with its flag
    /// clear zero.
    /// - Throws: ``SpoolError`` `.corrupt` whose message names the field and what was found
    ///   (never a payload byte), or `.unsupportedVersion` for a version newer than 1.
    /// - Complexity: O(payload size).
    public static func decode(_ bytes: [UInt8]) throws(SpoolError) -> OriginRecord {
        func corrupt(_ why: String) -> SpoolError { SpoolError(.corrupt, "origin record: \(why)") }
        guard bytes.count >= headerSize else {
            throw corrupt("\(bytes.count) bytes, shorter than the \(headerSize)-byte header")
        }
        let version = bytes[0]
        guard version != 0 else { throw corrupt("version 0") }
        guard version == Self.version else {
            throw SpoolError(.unsupportedVersion, "origin record: version \(version); this reader knows version \(Self.version)")
        }
        let flags = bytes[1]
        guard flags & ~(flagTime | flagConflict) == 0 else { throw corrupt("undefined flags 0x\(String(flags, radix: 16))") }
        return try bytes.withUnsafeBytes { buffer -> Result<OriginRecord, SpoolError> in
            let seq = loadLE(buffer, 18, as: UInt64.self)
            let time = loadLE(buffer, 26, as: Int64.self)
            let length = Int(loadLE(buffer, 34, as: UInt32.self))
            guard seq < Format.seqCeiling else { return .failure(corrupt("seq \(seq) is past the ceiling 2^62")) }
            guard flags & flagTime != 0 || time == 0 else { return .failure(corrupt("a time of \(time) with the time flag clear")) }
            guard length == buffer.count - headerSize else {
                return .failure(corrupt("payload length \(length), but \(buffer.count - headerSize) bytes follow the header"))
            }
            return .success(OriginRecord(log: LogID(bytes: bytes[2..<18]), seq: seq,
                                         time: flags & flagTime != 0 ? time : nil, payload: Array(bytes[headerSize...]),
                                         conflict: flags & flagConflict != 0))
        }.get()
    }
}

// MARK: The marker of a collector log

extension OriginRecord {
    /// The file whose presence in a log's directory says its records are origin records:
    /// `ORIGINS`, 16 bytes (FORMAT.md §11).
    public static let markerFileName = "ORIGINS"
    /// "SPOOLORG"
    static let markerMagic: [UInt8] = Array("SPOOLORG".utf8)
    // 0: magic[8] | 8: version u16 (1) | 10: reserved u16 (0) | 12: CRC-32C of bytes 0..<12

    /// The marker file's bytes.
    static var markerBytes: [UInt8] {
        var bytes = markerMagic
        bytes.appendLE(UInt16(version))
        bytes.appendLE(UInt16(0))
        bytes.appendLE(CRC32C.checksum(bytes))
        return bytes
    }

    /// Whether the log in `directory` stores origin records: its directory holds a regular
    /// file named ``markerFileName`` (a symbolic link does not count). One `lstat`; the file's
    /// contents are not read, so a damaged marker still marks the log (its records say
    /// themselves, by ``decode(_:)``, whether they can be read).
    public static func storesOrigins(at directory: String) -> Bool {
        var info = stat()
        guard lstat(directory + "/" + markerFileName, &info) == 0 else { return false }
        return (info.st_mode & S_IFMT) == S_IFREG
    }

    /// Marks `log` as a log of origin records, before its first record: writes the marker
    /// atomically (temporary file, `fdatasync`, rename, `fsync` of the directory) with the log's
    /// file mode. Does nothing when the log is already marked.
    ///
    /// Blocking: do not call it on Swift's cooperative pool.
    /// - Throws: ``SpoolError`` `.invalidArgument` when the log already holds records and is not
    ///   marked (they are not origin records: a collector must not mix its records into another
    ///   log); `.io` or `.diskFull` when the marker cannot be written.
    public static func markStoresOrigins(_ log: EventLog) throws {
        if storesOrigins(at: log.directory) { return }
        guard log.nextSeq == 0 else {
            throw SpoolError(.invalidArgument, "the log holds \(log.nextSeq) records that are not origin records (no \(markerFileName) file); give a collector a new directory", path: log.directory)
        }
        let path = log.directory + "/" + markerFileName
        try DirectoryIO.writeAtomically(markerBytes, to: path, directory: log.directory, permissions: log.configuration.fileMode)
    }
}
