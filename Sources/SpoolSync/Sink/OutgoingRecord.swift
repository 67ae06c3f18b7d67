import Spool

/// A record as every destination receives it: the id, seq, time and bytes a sink sends, the
/// same whichever sink sends them. The worker makes them once, where it reads a batch (its
/// source adapter, ``RecordUnwrapper``), keeps them with the batch, and hands them to the
/// ``SyncSink``'s `prepare`: a retry, a split after
/// a 413 or a hedge sends the same values again and never unwraps a record twice. A sink
/// takes a record's identity and bytes from nothing else (an HTTP envelope adds the drained
/// log's own `seq` and `time`, from ``stored``, which match its `Spool-Batch` header).
///
/// A log's own record goes out as it is: the log's id, the record's seq, its append time and
/// its exact bytes. A collector's log (`spool collector --log`, marked `ORIGINS`) holds
/// `OriginRecord`s (FORMAT.md §11): each is unwrapped, and goes out as the device's record —
/// the device log's id, its seq and time there, and its exact bytes — so a record keeps one
/// identity from the device to its destination, through any number of collectors.
///
/// **A collector's record that does not decode as an origin record** (damage, or a version this
/// reader does not know) goes out as the record it is, as a record of a log that is not a
/// collector's: under the collector log's own id and seq, with its append time and its exact
/// stored bytes, and ``isOrigin`` false (an HTTP envelope then carries no `origin_id`). Why:
/// - delivery stays at least once and no byte changes: the destination gets it, instead of a
///   dead-letter log on the collector's host that someone has to notice;
/// - its id is its own and stable: sent again after a lost answer, it repeats it, so the
///   destination still drops the duplicate (the id never borrows a device's);
/// - it is the identity the dead-letter log gives it too when a destination refuses it
///   (FORMAT.md §11), so `spool sync` of that log sends it under the same id.
///
/// Thread safety: a value type; use freely from any thread.
public struct OutgoingRecord: Sendable, Hashable {
    /// The record as read from the log being drained: its seq there is what the worker
    /// commits past, and its bytes are what a dead letter stores.
    public var stored: Record
    /// The id of the drained log for this record's seq (`LogEpochs`): the log's own id, or the
    /// id of the epoch holding the seq. An HTTP envelope's `id` and `Spool-Batch` header name
    /// it; every record of a request has the same.
    public var source: LogID
    /// The log the record is sent as coming from: the device's for an origin record, else
    /// ``source``.
    public var log: LogID
    /// The record's seq in ``log``.
    public var seq: UInt64
    /// Milliseconds since 1970: the append time, or the time of the envelope a collector
    /// received the record in; `nil` only for an origin record that arrived without one.
    public var time: Int64?
    /// The record's exact bytes: the payload, or the origin record's payload.
    public var bytes: [UInt8]
    /// Whether the record was unwrapped from an origin record (``log``, ``seq`` and ``time``
    /// are the device's, not the drained log's).
    public var isOrigin: Bool
    /// Whether the origin record is a conflict (another record of its id, with other bytes,
    /// was stored first): it goes out under an id of its own, so both reach the destination.
    public var conflict: Bool

    /// The id every sink sends: `"<log>-<seq>"`, or `"<log>-<seq>~<digest>"` for a
    /// ``conflict`` (`OriginRecord.eventID(log:seq:payload:conflict:)`).
    public var id: String { OriginRecord.eventID(log: log, seq: seq, payload: bytes, conflict: conflict) }

    /// The record `stored`, read from the log `logID`, as destinations receive it.
    ///
    /// The worker calls it through ``RecordUnwrapper``, once per record it reads; a sink never
    /// needs to (it is given these).
    ///
    /// - Parameters:
    ///   - stored: the record as read.
    ///   - logID: the id of the log it was read from, for this record's seq (its epoch's).
    ///   - origins: whether that log is a collector's, whose records are `OriginRecord`s:
    ///     then the record is unwrapped, or, when it does not decode, sent as it is (see
    ///     ``OutgoingRecord``).
    /// - Complexity: O(payload size) for an origin record (its payload is copied out), O(1) otherwise.
    public init(_ stored: Record, logID: LogID, origins: Bool) {
        self.stored = stored
        self.source = logID
        if origins, let origin = try? OriginRecord.decode(stored.payload) {
            (log, seq, time, bytes, isOrigin, conflict) = (origin.log, origin.seq, origin.time, origin.payload, true, origin.conflict)
        } else {
            (log, seq, time, bytes, isOrigin, conflict) = (logID, stored.seq, stored.timestamp, stored.payload, false, false)
        }
    }
}
