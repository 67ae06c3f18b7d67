import Metrics

/// The worker's swift-metrics counters, derived from ``SyncStats`` deltas so the two never
/// disagree. Dimensions: `consumer`, and `outcome` for uploads (`accepted` or a
/// ``SyncError/Code`` such as `serverError`, `rateLimited`, `payloadTooLarge`, `rejected`),
/// `kind` for failures (every ``SyncError/Code``, commits and reads included).
/// `spool_sync_hedges_total` counts hedged requests (``SyncStats/hedges``);
/// `spool_sync_damaged_records_total` and `spool_sync_damaged_ranges_total` the records and
/// ranges skipped because the log could not read them (``SyncStats/damaged``).
/// One gauge, `spool_sync_pending`: records written and not yet committed (the consumer's lag,
/// as the worker knows it), to watch a running sync from outside the process.
struct SyncMetrics: Sendable {
    private let consumer: String
    private let factory: any MetricsFactory
    private let retries: Counter
    private let hedges: Counter
    private let deadLettered: Counter
    private let records: Counter
    private let bytes: Counter
    private let damagedRecords: Counter
    private let damagedRanges: Counter
    private let pending: Gauge

    /// Instruments from `factory`, or from the process-wide `MetricsSystem` when nil.
    init(consumer: String, factory: (any MetricsFactory)? = nil) {
        self.consumer = consumer
        let factory = factory ?? MetricsSystem.factory
        self.factory = factory
        let dimensions = [("consumer", consumer)]
        retries = Counter(label: "spool_sync_retries_total", dimensions: dimensions, factory: factory)
        hedges = Counter(label: "spool_sync_hedges_total", dimensions: dimensions, factory: factory)
        deadLettered = Counter(label: "spool_sync_dead_lettered_total", dimensions: dimensions, factory: factory)
        records = Counter(label: "spool_sync_records_total", dimensions: dimensions, factory: factory)
        bytes = Counter(label: "spool_sync_bytes_total", dimensions: dimensions, factory: factory)
        damagedRecords = Counter(label: "spool_sync_damaged_records_total", dimensions: dimensions, factory: factory)
        damagedRanges = Counter(label: "spool_sync_damaged_ranges_total", dimensions: dimensions, factory: factory)
        pending = Gauge(label: "spool_sync_pending", dimensions: dimensions, factory: factory)
    }

    func record(from old: SyncStats, to new: SyncStats) {
        uploads("accepted", new.batches - old.batches)
        for (code, count) in new.failures {
            let delta = count - old.failures[code, default: 0]
            guard delta > 0 else { continue }
            if code.isRetryable || code == .payloadTooLarge || code == .rejected {
                uploads(code.description, delta)
            }
            Counter(label: "spool_sync_failures_total", dimensions: [("consumer", consumer), ("kind", code.description)], factory: factory)
                .increment(by: Int64(delta))
        }
        increment(retries, new.retries - old.retries)
        increment(hedges, new.hedges - old.hedges)
        increment(deadLettered, new.deadLettered - old.deadLettered)
        increment(records, new.records - old.records)
        increment(bytes, new.bytes - old.bytes)
        increment(damagedRecords, Int(clamping: new.damaged.records - old.damaged.records))
        increment(damagedRanges, new.damaged.rangeCount - old.damaged.rangeCount)
        if new.pending != old.pending { pending.record(new.pending) }
    }

    private func uploads(_ outcome: String, _ delta: Int) {
        guard delta > 0 else { return }
        Counter(label: "spool_sync_uploads_total", dimensions: [("consumer", consumer), ("outcome", outcome)], factory: factory)
            .increment(by: Int64(delta))
    }

    private func increment(_ counter: Counter, _ delta: Int) {
        if delta > 0 { counter.increment(by: Int64(delta)) }
    }
}
