import Spool

extension SyncStateMachine {
    package enum Event: Sendable {
        /// The worker started its automatic policies.
        case start
        case stop
        case pause
        case resume
        case setFlushInterval(Duration)
        /// The log wrote records up to (excluding) `end`.
        case recordsWritten(end: UInt64)
        case timerFired(generation: Int)
        case backoffExpired(generation: Int)
        /// The time of a batch retried on its own (see ``Action/scheduleWake(at:)``) has come.
        case wake
        /// A flush: `through`, if set, is the offset the caller waits for (records before it);
        /// it is answered once the consumer is committed that far, whatever is written later.
        case flushRequested(id: Int, deadline: Duration?, retries: Int, through: UInt64? = nil)
        /// The deadline of flush `id` (see ``Action/scheduleDeadline(id:at:)``) has come.
        case flushDeadlinePassed(id: Int)
        /// A read finished, cut into batches in seq order of the records from the `from` it
        /// was asked for (at most the `batches` asked for); a single batch with no records
        /// whose `end` is not past the window's end means nothing more is pending.
        case readCompleted([SyncBatch])
        case readFailed(SyncError)
        /// The request in `slot` finished; `bytes` is the size of the body sent;
        /// `declaredCapacity`, the requests the destination said it takes at once
        /// (``SyncSink/declaredCapacity``).
        case uploadCompleted(slot: Int, SinkOutcome, bytes: Int, declaredCapacity: Int?)
        case deadLetterCompleted
        case deadLetterFailed(SyncError)
        /// The damaged ranges of ``Action/recordDamage(_:)`` are stored durably.
        case damageRecorded
        case damageRecordFailed(SyncError)
        case commitCompleted
        case commitFailed(SyncError)
    }

    package enum Action: Sendable {
        /// Read up to `count` records and about `bytes` payload bytes from the committed offset
        /// (the window's records again, then new ones: a consumer reads only from its committed
        /// offset); drop the records before `from` and cut the rest into at most `batches`
        /// batches of at most `maxCount` records and `maxBytes` encoded bytes each.
        case read(from: UInt64, count: Int, bytes: Int, batches: Int, maxCount: Int, maxBytes: Int)
        /// Send the batch as the request in `slot` (answered with that slot); it may take
        /// `timeout` (see ``requestTimeout(now:)``). Several may be in flight, two of them for
        /// one batch when it is hedged (``Hedging``): each copy has its own slot.
        case upload(SyncBatch, slot: Int, timeout: Duration)
        /// Write refused records to the dead-letter log (durably), with the refusal: the records
        /// as read from the log (each ``OutgoingRecord/stored``), whatever the sink was sent.
        case deadLetter([Record], SyncError)
        /// Store durably that these ranges of records the log could not read are skipped, and
        /// log them at error level (never payloads): the commit after it passes them.
        case recordDamage([DamagedRange])
        /// Commit the consumer so that `end` is the next record it delivers.
        case commit(upTo: UInt64)
        /// (Re)arm the interval timer; a fire with an older generation is ignored.
        case scheduleTimer(at: Duration, generation: Int)
        case cancelTimer
        /// Wake the drain up at `until` to retry; a wake with an older generation is ignored.
        case backoff(until: Duration, generation: Int)
        /// Send ``Event/wake`` at `at`, replacing any wake armed before (the machine asks again
        /// for any later one it still needs): a failed batch retried on its own is due then.
        case scheduleWake(at: Duration)
        /// Tell the flush callers `ids` how a request went.
        case notify(ids: [Int], BatchResult)
        /// Answer the flush caller `id`.
        case finishFlush(id: Int, FlushReport)
        /// Send ``Event/flushDeadlinePassed(id:)`` at `at`, unless flush `id` is answered
        /// first. A flush that joins a request already in flight (started with the full
        /// `requestTimeout`) is answered at its deadline this way, not when the request ends.
        case scheduleDeadline(id: Int, at: Duration)
        /// Log a refusal (the error, never payloads) as it is dead-lettered.
        case logRefusal(SyncError, records: Int)
        /// The machine stopped by itself (a fatal answer): tear down as ``SyncWorker/stop()``
        /// does.
        case shutDown
    }

    /// The operation running beside the requests: at most one at a time.
    package enum Local: Sendable {
        /// A read from the window's end at the time it was asked (`from`): its batches are
        /// added only if the window still ends there (a 413 or a failure may have cut it since).
        case reading(from: UInt64)
        case committing(end: UInt64, CommitKind)
        case deadLettering(SyncBatch)
        /// Recording the damaged ranges a commit to `end` passes, before it.
        case recordingDamage(end: UInt64, CommitKind, [DamagedRange])
    }

    package enum CommitKind: Sendable {
        /// Batches the server accepted: how many, their records and body bytes.
        case delivered(batches: Int, records: Int, bytes: Int)
        case deadLettered(records: Int)
        case skipped
    }
}
