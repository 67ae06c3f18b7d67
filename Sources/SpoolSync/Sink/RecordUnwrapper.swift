import Spool

/// The worker's source adapter: turns the records it reads from a log into the
/// ``OutgoingRecord``s every sink receives, once per read, so a collector's `OriginRecord`
/// is decoded in one place and by one written policy (a record that does not decode goes
/// out as it is, under the collector log's own id: see ``OutgoingRecord``).
///
/// The worker asks the sink for its unwrapper (``SyncSink/unwrapper``: the log id and
/// whether the log is a collector's, as the sink was made with), or, when the sink names
/// none, unwraps as records of the drained log, which is not a collector's. A caller that
/// drives a sink by hand (a test, a benchmark) unwraps with it too.
///
/// Thread safety: a value type; use freely from any thread.
public struct RecordUnwrapper: Sendable, Hashable {
    /// The log the records are read from: the id a record that is not unwrapped goes out under.
    public var logID: LogID
    /// Whether that log is a collector's (`spool collector --log`, marked `ORIGINS`), whose
    /// records are `OriginRecord`s to unwrap.
    public var origins: Bool
    /// The log's epochs (`LogEpochs`, FORMAT.md §13): a record of an epoch goes out under the
    /// epoch's id. None unless the worker sets them (from its consumer's `epochs`).
    public var epochs: LogEpochs

    /// The adapter for the records of log `logID`; `origins` says whether it is a collector's.
    public init(logID: LogID, origins: Bool) {
        self.logID = logID
        self.origins = origins
        self.epochs = LogEpochs(base: logID)
    }

    /// `record` as destinations receive it (``OutgoingRecord/init(_:logID:origins:)``).
    ///
    /// - Complexity: O(payload size) for an origin record (its payload is copied out), O(1) otherwise.
    public func unwrap(_ record: Record) -> OutgoingRecord {
        OutgoingRecord(record, logID: epochs.epochs.isEmpty ? logID : epochs.id(forSeq: record.seq), origins: origins)
    }

    /// `records`, in their order, as destinations receive them.
    ///
    /// - Complexity: O(total payload size) for a collector's log, O(count) otherwise.
    public func unwrap(_ records: some Collection<Record>) -> [OutgoingRecord] {
        records.map(unwrap)
    }
}
