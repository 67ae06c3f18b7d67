/// What opening a log found and repaired (a ``LogSnapshot`` finds the same and repairs
/// nothing: ``repaired`` is false, and each "cut", "removed" or "reset" below is what the next
/// writing open will do). Damage and repairs are logged too: a torn tail or a
/// rewritten segment header at `info`; damage inside the active segment, a new log id and a
/// reset consumer at `warning`. Housekeeping (leftover temporary files removed, preallocated
/// zeros cut) is only in the report.
public struct RecoveryReport: Sendable, Equatable {
    /// A torn or partial last block that opening truncated, with nothing valid after it: a
    /// write interrupted by a crash, so its records were never acknowledged, or records
    /// acknowledged only as `buffered` or `written` that a power loss did not let reach the
    /// disk whole (those levels do not survive one). A valid block after damage is never cut
    /// (see ``powerCutHoles`` and ``corruptions``); a block acknowledged `synced` is never cut
    /// unless the disk itself damaged it.
    public struct TornTail: Sendable, Equatable {
        /// The segment file's name.
        public var segment: String
        /// The offset the file was cut back to.
        public var offset: Int64
        /// How many bytes were cut.
        public var bytes: Int64
    }

    /// The torn tail that was truncated, if any.
    public var tornTail: TornTail?
    /// Zero bytes past the last block that opening cut: space synced writes preallocated
    /// (FORMAT.md §6), not damage.
    public var preallocatedBytesCut: Int64 = 0
    /// Records a power cut lost inside the active segment, with valid blocks after them
    /// (FORMAT.md §6, "Holes a power cut leaves"): never synced, in a page the page cache did
    /// not write back while it wrote later ones. The blocks after the first hole were moved to
    /// a segment of their own, so the lost seqs read as *missing*; nothing valid was cut.
    public struct PowerCutHole: Sendable, Equatable {
        /// The segment file the hole is in.
        public var segment: String
        /// The seqs lost.
        public var records: Range<UInt64>
        /// The segment the blocks after the first hole were moved to.
        public var movedTo: String
    }

    /// The holes a power cut left inside the active segment (moved past by this open, or by the
    /// next writing one).
    public var powerCutHoles: [PowerCutHole] = []
    /// Damaged stretches found inside the active segment (a valid block follows each one);
    /// readers report them with their seq ranges.
    public var corruptions: [String] = []
    /// Segment files that do not fit the log's sequence (an empty file before the last
    /// segment, or a last segment starting below the end of the one before it): renamed to
    /// `<name>.misfit` and never written into, so no seq is handed out twice. Damage: `verify`
    /// fails while one is found.
    public var setAsideSegments: [String] = []
    /// Files in the directory that are not part of the log's format (left untouched).
    public var ignoredFiles: [String] = []
    /// Leftover temporary files from an interrupted atomic write (removed).
    public var removedTemporaryFiles: [String] = []
    /// Consumers whose offset file was unreadable and was reset to the oldest stored record.
    public var resetConsumers: [String] = []
    /// Whether the log was created by this open.
    public var created = false
    /// Whether what is reported was repaired (an ``EventLog``), or only found (a ``LogSnapshot``).
    public var repaired = true

    /// A report of a log that needed no repair.
    public init() {}
}
