/// The other side of a comparison: a store built the way an analytics SDK builds it
/// (the Sensors Analytics SDK's SQLite table, in `Benchmarks/`), run on the same events
/// in the same process, alternating with Spool.
///
/// This is the seam that keeps SQLite out of the root package: `spool bench` runs with
/// no baseline (Spool against the hardware only); Benchmarks' `compare` passes one.
package protocol Baseline: Sendable {
    /// The store's name in the table, e.g. `"SQLite"`.
    var name: String { get }

    /// Appends events (cycling `events`) from one producer in `mode` to a new store in
    /// `directory` until `budget` runs out, timing each call. The time includes closing
    /// the store.
    func append(_ mode: BaselineAppend, events: EventSet, directory: String, budget: Budget) throws -> Run

    /// Stores `count` events (untimed), closes the store and returns its bytes on disk;
    /// then reopens it in `mode` and drains it — take the `batch` oldest, build the JSON
    /// array request body, delete them — until empty, timed.
    func drain(_ mode: BaselineDrain, batch: Int, events: EventSet, count: Int, directory: String) throws -> (run: Run, bytes: Int)

    /// Stores `count` events one per transaction, as a trickling app does, at the setting
    /// that survives a process kill (Spool's `written`), and returns the bytes on disk they
    /// added.
    func trickle(events: EventSet, count: Int, directory: String) throws -> TrickleBytes
}

/// What trickled events cost a store on disk, per event.
package struct TrickleBytes: Sendable, Codable {
    /// Growth of the store's files once it is closed (for SQLite: the database after its WAL
    /// was checkpointed into it and removed), per event.
    package var perEvent: Double
    /// Growth of its files while open (for SQLite: the database and its WAL), per event.
    package var perEventWhileOpen: Double

    package init(perEvent: Double, perEventWhileOpen: Double) {
        self.perEvent = perEvent
        self.perEventWhileOpen = perEventWhileOpen
    }
}

/// How a baseline commits appends.
package enum BaselineAppend: String, Sendable, CaseIterable, Codable {
    /// One event per transaction, `synchronous=FULL` (durable on return).
    case full
    /// One event per transaction, `synchronous=NORMAL` (WAL: survives a process kill).
    case normal
    /// One event per transaction, `synchronous=OFF` (survives a process kill).
    case off
    /// 100 events per transaction, `synchronous=OFF`.
    case offBatch100

    /// The label used in the table.
    package var label: String {
        switch self {
        case .full: "FULL, 1/txn"
        case .normal: "NORMAL, 1/txn"
        case .off: "OFF, 1/txn"
        case .offBatch100: "OFF, 100/txn"
        }
    }
}

/// How a baseline commits the deletes of a drain.
package enum BaselineDrain: String, Sendable, CaseIterable, Codable {
    case full
    case off

    package var label: String {
        switch self {
        case .full: "FULL"
        case .off: "OFF"
        }
    }
}
