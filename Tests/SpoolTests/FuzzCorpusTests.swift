import Foundation
import SpoolFuzzInput
import Testing

/// Replays the fuzz regression corpus (Tests/SpoolTests/FuzzCorpus, inputs of the `SpoolFuzz`
/// target) through the readers exactly as the fuzz target does (`SpoolFuzzInput`): every input
/// ends in records or a typed `SpoolError`, never a crash or a hang. The first byte of an input
/// says where the rest goes (`FuzzMode`).
@Suite struct FuzzCorpusTests {
    static let corpus = Bundle.module.path(forResource: "FuzzCorpus", ofType: nil)!

    @Test func everyCorpusInputEndsInRecordsOrATypedError() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.corpus).sorted()
        #expect(names.count >= 5)
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var outcomes = [String: FuzzOutcome]()
        for name in names {
            let outcome = runFuzzInput(readFile(Self.corpus + "/" + name), directory: dir.path)
            // Anything but a SpoolError thrown fails the test; a crash fails the run.
            if case .failed = outcome { Issue.record("\(name): \(outcome)") }
            outcomes[name] = outcome
        }
        // The seeds made from the golden segment still read as the golden segment does.
        #expect(outcomes["seed-active-golden"] == .read(records: 4, notices: 0))
        #expect(outcomes["seed-checked-golden-blocks"] == .read(records: 4, notices: 0))
        // Its offset is past the log's last record (a fast commit that outlived the data in a
        // power loss): seqs skip ahead to it, and the gap reads as one missing notice.
        #expect(outcomes["seed-offset-two-slots"] == .read(records: 2, notices: 1))
        // Compact blocks, whole and with checksums fixed up, read in full.
        #expect(outcomes["fuzz-m0-compact-active"] == .read(records: 6, notices: 0))
        #expect(outcomes["fuzz-m2-compact-blocks"] == .read(records: 6, notices: 0))
        // A damaged block then a valid stale copy of the block before it: in a sealed segment
        // the lost record is one corrupt range to the next segment (the search passes over the
        // copy); in the active one the copy continues nothing, and the tail is cut.
        #expect(outcomes["fuzz-m1-stale-copy-after-damage"] == .read(records: 3, notices: 1))
        #expect(outcomes["fuzz-m0-stale-copy-after-damage"] == .read(records: 3, notices: 0))
        // Segment header values no writer makes, with a valid CRC: refused, never guessed at.
        #expect(outcomes["fuzz-m0-segment-version-0"] == .refused(.unsupportedVersion))
        #expect(outcomes["fuzz-m0-segment-header-size-65"] == .refused(.unsupportedVersion))
    }
}
