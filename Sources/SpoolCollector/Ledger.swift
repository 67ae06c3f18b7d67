import Logging
import Spool

/// The collector's memory of what it recorded: the seqs received per log with the digests of
/// the bytes stored under the latest of them, the output file and the collector's log.
///
/// Its calls block on the files: the collector only touches it from its serial dispatch queue,
/// which also fixes the order of the output and of the log. Not thread-safe.
struct Ledger {
    private var logs: [String: ReceivedSeqs] = [:]
    /// The digests of the bytes stored under each log's latest seqs.
    private var digests: [String: StoredDigests] = [:]
    /// When each log was last seen, as a count of batches: the least recently seen are
    /// forgotten first.
    private var lastSeen: [String: UInt64] = [:]
    private var batches: UInt64 = 0
    private let maxLogs: Int
    private var output: OutputFile?
    /// The collector's log (``CollectorConfiguration/logDirectory``): every new record is
    /// appended to it as an ``OriginRecord``.
    private(set) var log: EventLog?

    /// What one batch did to the ledger.
    struct Outcome {
        /// The records not received before, in batch order: new ids, and conflicts.
        var fresh: [ReceivedRecord] = []
        /// How many records were received before (the same id and the same bytes).
        var duplicates = 0
        /// How many of ``fresh`` are conflicts: an id already stored with other bytes.
        var conflicts = 0
        /// How many logs were forgotten to make room.
        var forgotten = 0
        /// The end (exclusive) of the collector log's records once the batch is appended: when
        /// they are durable, so is every record of the batch, the repeats' first copies
        /// included. Nil without a log, or when the log holds nothing.
        var syncTarget: UInt64?
    }

    /// - Parameter maxLogs: how many logs' received seqs are kept (``CollectorConfiguration/maxTrackedLogs``).
    init(maxLogs: Int) {
        self.maxLogs = maxLogs
    }

    /// How many logs' received seqs are kept now (at most `maxLogs`).
    var trackedLogs: Int { logs.count }

    /// Opens the output file (see ``OutputFile/init(path:)``).
    mutating func open(path: String) throws {
        output = try OutputFile(path: path)
    }

    /// Opens (creating if needed) the collector's log and marks it as a log of origin records
    /// (``OriginRecord/markStoresOrigins(_:)``), then learns what it holds
    /// (``learn(from:)``): a collector restarted still compares a repeat with what it stored.
    mutating func openLog(directory: String, configuration: Configuration, logger: Logger) throws -> EventLog {
        let log = try EventLog.open(directory: directory, configuration: configuration, logger: logger)
        do {
            try OriginRecord.markStoresOrigins(log)
            let started = ContinuousClock.now
            let (records, logs) = try learn(from: log)
            if records > 0 {
                logger.info("learned the records the log holds", metadata: [
                    "records": "\(records)", "logs": "\(logs)", "seconds": "\((ContinuousClock.now - started).seconds)"])
            }
        } catch {
            try? log.close()
            throw error
        }
        self.log = log
        return log
    }

    /// Learns the seqs and digests of the origin records `log` holds, oldest first, as if they
    /// had been received in that order: the same memory (bounded the same way) a collector
    /// that never stopped would have of them. Records the log no longer holds (its retention
    /// deleted them once forwarded) are not learned. Returns how many records, of how many logs.
    private mutating func learn(from log: EventLog) throws -> (records: Int, logs: Int) {
        let reader = log.reader()
        var records = 0
        var seen: Set<String> = []
        while let item = try reader.next() {
            guard case .record(let stored) = item, let origin = try? OriginRecord.decode(stored.payload) else { continue }
            let id = origin.log.description
            if logs[id] == nil && logs.count >= maxLogs { forgetLeastRecentlySeen() }
            // A conflict's seq was received before it (or flagged by a forwarder): as in `record`.
            if !origin.conflict { logs[id, default: ReceivedSeqs()].insert(origin.seq) }
            digests[id, default: StoredDigests()].remember(OriginRecord.digest(of: origin.payload), at: origin.seq)
            batches += 1
            lastSeen[id] = batches
            seen.insert(id)
            records += 1
        }
        return (records, seen.count)
    }

    /// Forgets the least recently seen tenth (at least one) of the logs; returns how many.
    @discardableResult
    private mutating func forgetLeastRecentlySeen() -> Int {
        let oldest = lastSeen.sorted { $0.value < $1.value }.prefix(max(1, maxLogs / 10))
        for (id, _) in oldest {
            logs[id] = nil
            digests[id] = nil
            lastSeen[id] = nil
        }
        return oldest.count
    }

    /// Records the records of one batch (from one log, or from many for a batch a collector
    /// forwarded) that were not received before. A record whose id (log id and seq) was
    /// received before is a duplicate only when its bytes have the digest of a record stored
    /// under that id; otherwise it is a **conflict** (``ReceivedRecord/conflict``), stored under
    /// an id of its own: so is a repeat of a seq whose digests were forgotten
    /// (``StoredDigests``), which cannot be compared, and a conflict a forwarding collector
    /// flagged. Then: one write of the output file, and one
    /// `buffered` append per record to the collector's log (whose durability the caller then
    /// awaits up to ``Outcome/syncTarget``). If a write or an append fails, nothing is marked
    /// received, so a retry records them (again, in the log, for those appended before the
    /// failure: repeats are harmless downstream, where the origin id is the key).
    ///
    /// Past `maxLogs` logs, the least recently seen tenth (at least one) is forgotten, so memory
    /// stays bounded whatever number of log ids clients send: a batch re-sent later from a
    /// forgotten log is recorded again.
    mutating func record(_ records: [ReceivedRecord]) throws -> Outcome {
        guard !records.isEmpty else { return Outcome(syncTarget: Self.end(of: log)) }
        // Copies of the logs' seqs, stored back only once the batch is written.
        var touched: [String: ReceivedSeqs] = [:]
        var order: [String] = []
        // The ids and digests this batch stores, in order, remembered once it is written.
        var remembered: [StoredID] = []
        var storedHere: Set<StoredID> = []
        var outcome = Outcome()
        for var record in records {
            if touched[record.logID] == nil {
                touched[record.logID] = logs[record.logID] ?? ReceivedSeqs()
                order.append(record.logID)
            }
            let digest = record.digest
            let key = StoredID(logID: record.logID, seq: record.seq, digest: digest)
            if !record.conflict && touched[record.logID]!.insert(record.seq) {
                outcome.fresh.append(record)
            } else if digests[record.logID]?.holds(digest, at: record.seq) == true || storedHere.contains(key) {
                outcome.duplicates += 1
                continue
            } else {
                record.conflict = true
                outcome.fresh.append(record)
                outcome.conflicts += 1
            }
            remembered.append(key)
            storedHere.insert(key)
        }
        if let log, !outcome.fresh.isEmpty {
            // Checked before any append: a batch no retry can store is refused whole (413, 400).
            let stored = try outcome.fresh.map { record -> [UInt8] in
                guard record.seq < OriginRecord.seqLimit else {
                    throw BatchRejection.badRequest("seq \(record.seq) is past the 2^62 a Spool log can hold")
                }
                guard let origin = LogID(hex: record.logID) else { throw BatchRejection.badRequest("invalid log id") }
                let bytes = OriginRecord(log: origin, seq: record.seq, time: record.time, payload: record.payload, conflict: record.conflict).encoded()
                guard bytes.count <= log.configuration.maxRecordSize else {
                    throw BatchRejection(status: 413, message: "a record of \(bytes.count) bytes, with its origin, is past the collector log's \(log.configuration.maxRecordSize)")
                }
                return bytes
            }
            for bytes in stored { try log.append(bytes) }
        }
        if let output, !outcome.fresh.isEmpty {
            var lines = ""
            for record in outcome.fresh { lines += record.ndjsonLine }
            try output.append(Array(lines.utf8))
        }
        for logID in order {
            if logs[logID] == nil && logs.count >= maxLogs {
                outcome.forgotten += forgetLeastRecentlySeen()
            }
            batches += 1
            logs[logID] = touched[logID]
            lastSeen[logID] = batches
        }
        for key in remembered {
            digests[key.logID, default: StoredDigests()].remember(key.digest, at: key.seq)
        }
        outcome.syncTarget = Self.end(of: log)
        return outcome
    }

    /// One record's id and the digest of its bytes.
    private struct StoredID: Hashable {
        var logID: String
        var seq: UInt64
        var digest: UInt64
    }

    /// The end (exclusive) of `log`'s records, if it has one.
    private static func end(of log: EventLog?) -> UInt64? {
        guard let next = log?.nextSeq, next > 0 else { return nil }
        return next
    }

    /// Syncs and closes the output file and the log, if any. Later calls do nothing.
    mutating func close() throws {
        defer {
            output = nil
            log = nil
        }
        var failure: (any Error)?
        do { try output?.close() } catch { failure = error }
        do { try log?.close() } catch { failure = failure ?? error }
        if let failure { throw failure }
    }
}
