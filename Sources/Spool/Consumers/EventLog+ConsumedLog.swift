/// The writing process's side of a ``Consumer``: the segment list is the writer's shared
/// state, and the writer makes records durable (its sync, shared with group commit).
extension EventLog: ConsumedLog {
    /// Throws `.closed` once the log is closing: its directory lock is then released, and
    /// another process may own the files.
    func checkOpen(consumer name: String) throws {
        if lock.withLock({ state.status.closeRequested }) { throw SpoolError(.closed, "consumer \(name): the log is closed") }
    }

    /// Registered at the oldest stored record in the same step that reads it, before the file
    /// is made (several fsyncs): retention run meanwhile by another consumer's commit then keeps
    /// what this one starts at.
    func registerNewConsumer(_ name: String) -> UInt64 {
        lock.withLock {
            let start = state.firstSeq
            return state.registerConsumer(name, at: start)
        }
    }

    /// A consumer that does not exist never holds retention back.
    func forgetNewConsumer(_ name: String) {
        lock.withLock { state.forgetConsumer(name) }
    }

    /// Read after the committer's lock is held: a committer in another process may have moved it.
    func consumerOpened(_ name: String, at next: UInt64) {
        lock.withLock { state.recordCommit(of: name, at: next) }
    }

    /// Written records past the durable ones: have the writer sync them (one fdatasync, shared
    /// with group commit). False when there are none, or the log cannot sync now (the read then
    /// returns what is already durable).
    func readMore() throws -> Bool {
        let (written, synced) = lock.withLock { (state.writtenEnd, state.syncedEnd) }
        return synced < written && (try? waitUntilBlocking(before: written, is: .synced)) != nil
    }

    func commitBound(for end: UInt64) throws -> (end: UInt64, what: String) {
        (nextSeq, "appended")
    }

    func makeDurable(upTo end: UInt64, level: Durability) throws {
        try waitUntilBlocking(before: end, is: level)
    }

    var allowsFastCommits: Bool { true }

    func committedDurably(_ name: String, at next: UInt64) {
        lock.withLock { state.recordCommit(of: name, at: next) }
        do { try applyRetention() } catch {
            logger.warning("retention could not delete passed segments; it runs again at the next durable commit",
                           metadata: ["consumer": "\(name)", "error": "\(error)"])
        }
    }

    func countExpired(_ count: UInt64) {
        lock.withLock { state.countExpired(count) }
        metrics.expiredRecords.increment(by: Int(count))
    }
}
