/// What one token of a ``TokenFile`` may write: records of any log, or only of the log ids
/// its line names (`<token> <log id> <log id>…`).
///
/// A bound token is checked against every record of a batch (its `Spool-Batch` log id and
/// each record's origin), so it cannot send another device's ids, forwarded or not. A
/// forwarding collector's token names no log id.
enum TokenGrant: Sendable, Equatable {
    /// Records of any log id.
    case anyLog
    /// Only records of these log ids (32 lowercase hex digits each).
    case logs(Set<String>)

    /// Whether a record of `logID` may be written with this grant.
    func allows(_ logID: String) -> Bool {
        switch self {
        case .anyLog: true
        case .logs(let allowed): allowed.contains(logID)
        }
    }
}
