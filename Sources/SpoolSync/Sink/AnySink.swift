import Spool

/// A ``SyncSink`` with its request type erased, so the worker and its batches need no generic
/// parameter of the sink's: a request made by `prepare` goes back to the same sink's `send`,
/// the only place its type is known again.
///
/// It is also where the worker unwraps what it reads (its source adapter): a read's new
/// records become ``OutgoingRecord``s here, once, by the sink's ``RecordUnwrapper``, and the
/// batches keep them, so that a retry, a split or a hedge never unwraps a record again.
package struct AnySink: Sendable {
    let maxInFlight: Int?
    /// How the records read become what the sink is given: the sink's own unwrapper, or the
    /// drained log's, which is not a collector's.
    package let unwrapper: RecordUnwrapper
    private let prepareNext: @Sendable (ArraySlice<OutgoingRecord>, Int) -> SinkRequest<any Sendable>
    private let prepareExactly: @Sendable ([OutgoingRecord]) -> SinkRequest<any Sendable>
    private let sendRequest: @Sendable (any Sendable, Duration) async -> SinkOutcome
    /// The sink's ``SyncSink/declaredCapacity``, read after each answer.
    let declaredCapacity: @Sendable () -> Int?
    let shutdown: @Sendable () async -> Void

    /// `sink` as the worker sees it, draining the log `logID` (the id its records go out
    /// under when the sink names no ``SyncSink/unwrapper`` of its own).
    package init<S: SyncSink>(_ sink: S, logID: LogID, epochs: LogEpochs? = nil) {
        maxInFlight = sink.maxInFlight
        var unwrapper = sink.unwrapper ?? RecordUnwrapper(logID: logID, origins: false)
        if let epochs, epochs.base == unwrapper.logID { unwrapper.epochs = epochs }
        self.unwrapper = unwrapper
        prepareNext = { records, maxBytes in
            let request = sink.prepare(records, maxBytes: maxBytes)
            precondition((1...records.count).contains(request.count), "a sink's request carries 1 to \(records.count) records")
            return SinkRequest(body: request.body, count: request.count, bytes: request.bytes, measuredBytes: request.measuredBytes)
        }
        prepareExactly = { records in
            let request = sink.prepare(exactly: records)
            return SinkRequest(body: request.body, count: request.count, bytes: request.bytes, measuredBytes: request.measuredBytes)
        }
        sendRequest = { body, timeout in
            // Only this closure's own sink made `body`: a mismatch is a programming error.
            await sink.send(body as! S.Request, timeout: timeout)
        }
        declaredCapacity = { sink.declaredCapacity }
        shutdown = { await sink.shutdown() }
    }

    /// The batch to send from `records` read up to `end`, covering `start ..< end`: the longest
    /// prefix of the records that one request carries, with its request. It commits to `end`
    /// when it takes every record, and otherwise through its last record.
    func prepare(_ records: ArraySlice<OutgoingRecord>, end: UInt64, start: UInt64, maxBytes: Int) -> SyncBatch {
        guard !records.isEmpty else { return SyncBatch(outgoing: [], start: start, end: end) }
        let request = prepareNext(records, maxBytes)
        if request.count == records.count {
            return SyncBatch(outgoing: Array(records), start: start, end: end, request: request)
        }
        let taken = Array(records.prefix(request.count))
        return SyncBatch(outgoing: taken, start: start, end: taken[taken.count - 1].stored.seq + 1, request: request)
    }

    /// The batches to add to the window from what a read returned, in seq order: the records
    /// from `from` on (a read starts at the committed offset, so it returns the window's
    /// records again: they are dropped, and are not unwrapped again), in at most `batches`
    /// batches of at most `maxCount` records each, each cut by
    /// ``prepare(_:end:start:maxBytes:)``. Records left over are read again later. The batches
    /// are contiguous from `from`: the first starts there, each of the others where the one
    /// before ends. With no record from `from` on, one empty batch from `from` that carries
    /// the read's `endSeq` (a skipped range), or ends at `from` (nothing pending).
    ///
    /// The ranges the read skipped as damaged (`corrupt` notices) go with the batch holding
    /// them (``SyncBatch/damage``).
    ///
    /// The new records are unwrapped here, once for this read, and no more of them than the
    /// batches can take (`batches × maxCount`); those a byte limit leaves over are unwrapped
    /// again by the read that takes them.
    package func prepare(_ read: ConsumerBatch, from: UInt64, maxCount: Int, maxBytes: Int, batches: Int) -> [SyncBatch] {
        let fresh = read.records[(read.records.firstIndex { $0.seq >= from } ?? read.records.endIndex)...]
        let (most, overflow) = maxCount.multipliedReportingOverflow(by: max(0, batches))
        var rest = unwrapper.unwrap(fresh.prefix(overflow ? Int.max : most))[...]
        var left = fresh.count
        var cut: [SyncBatch] = []
        var start = from
        while cut.count < batches, !rest.isEmpty {
            // One request carries the records of one id: an epoch's records go apart.
            let source = rest[rest.startIndex].source
            let chunk = rest.prefix(maxCount).prefix { $0.source == source }
            let end = chunk.count == left ? read.endSeq : chunk[chunk.endIndex - 1].stored.seq + 1
            let batch = prepare(chunk, end: end, start: start, maxBytes: maxBytes)
            cut.append(batch)
            rest = rest.dropFirst(batch.outgoing.count)
            left -= batch.outgoing.count
            start = batch.end
        }
        if cut.isEmpty { cut = [SyncBatch(outgoing: [], start: from, end: max(from, read.endSeq))] }
        // Each damaged range the read skipped goes with the batch whose offsets hold it (a
        // notice lies between two records, so inside one batch); those past the last batch
        // are read again with it. A range that began inside the window (damage running to the
        // end of a segment that has grown since) counts from `from`: the part before was
        // recorded with the batch that holds it.
        for notice in read.notices where notice.kind == .corrupt && notice.range.upperBound > from {
            var damage = DamagedRange(notice)
            damage.seqs = max(notice.range.lowerBound, from)..<notice.range.upperBound
            guard let index = cut.firstIndex(where: { damage.seqs.lowerBound < $0.end }) else { break }
            cut[index].damage.append(damage)
        }
        return cut
    }

    /// The request of `batch`: the one prepared with it, or, for a half of a split, one made
    /// now from the records the batch was read with (nothing is unwrapped again).
    func request(for batch: SyncBatch) -> SinkRequest<any Sendable> {
        batch.request ?? prepareExactly(batch.outgoing)
    }

    /// Sends a request this sink prepared.
    func send(_ request: SinkRequest<any Sendable>, timeout: Duration) async -> SinkOutcome {
        await sendRequest(request.body, timeout)
    }
}
