import Foundation
import Testing
@testable import Spool

/// The stored form of a collector's records (FORMAT.md §11), pinned byte by byte and attacked:
/// every truncation, every wrong length, every flag, a seq past the ceiling, garbage.
@Suite struct OriginRecordTests {
    static let device = LogID(hex: "00112233445566778899aabbccddeeff")!
    static let record = OriginRecord(log: device, seq: 0x0102, time: 1_767_225_600_000, payload: Array(#"{"a":1}"#.utf8))

    /// The golden bytes of ``record``, written out by hand from FORMAT.md §11.
    static let golden: [UInt8] =
        [0x01, 0x01]                                                   // version 1, time present
        + [0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]
        + [0x02, 0x01, 0, 0, 0, 0, 0, 0]                               // seq 258
        + [0x00, 0xa8, 0xda, 0x76, 0x9b, 0x01, 0x00, 0x00]             // time 1_767_225_600_000 = 0x19b_76da_a800
        + [0x07, 0, 0, 0]                                              // payload length 7
        + Array(#"{"a":1}"#.utf8)

    @Test func encodingMatchesTheGoldenBytesAndDecodesBack() throws {
        var time = [UInt8]()
        time.appendLE(Int64(1_767_225_600_000))
        #expect(Array(Self.golden[26..<34]) == time)
        #expect(Self.record.encoded() == Self.golden)
        #expect(try OriginRecord.decode(Self.golden) == Self.record)
        #expect(Self.record.id == "00112233445566778899aabbccddeeff-258")
    }

    @Test func aRecordWithoutTimeHasItsFlagClearAndZeroTime() throws {
        let untimed = OriginRecord(log: Self.device, seq: 7, time: nil, payload: [0xff, 0x00])
        let bytes = untimed.encoded()
        #expect(bytes[1] == 0)
        #expect(bytes[26..<34].allSatisfy { $0 == 0 })
        #expect(bytes.count == OriginRecord.headerSize + 2)
        #expect(try OriginRecord.decode(bytes) == untimed)
        // A time of 0 is a time: its flag is set.
        let epoch = OriginRecord(log: Self.device, seq: 7, time: 0, payload: [])
        #expect(try OriginRecord.decode(epoch.encoded()).time == 0)
        #expect(epoch.encoded()[1] == 1)
    }

    @Test func everyTruncationIsCorruptAndNamesNoPayload() {
        let secret = Array("secret-payload".utf8)
        let bytes = OriginRecord(log: Self.device, seq: 1, time: -5, payload: secret).encoded()
        for cut in 0..<bytes.count {
            let error = decodeError(Array(bytes[..<cut]))
            #expect(error?.code == .corrupt, "cut at \(cut)")
            #expect(error.map { !$0.description.contains("secret") } ?? false)
        }
    }

    @Test func aLengthThatDisagreesWithTheBytesIsCorrupt() {
        var bytes = Self.golden
        for length: UInt32 in [0, 6, 8, 1 << 20, UInt32.max] {
            bytes.storeLE(length, at: 34)
            let error = decodeError(bytes)
            #expect(error?.code == .corrupt)
            #expect(error?.message.contains("payload length \(length), but 7 bytes follow") == true, "\(String(describing: error))")
        }
        // Trailing bytes past the length.
        #expect(decodeError(Self.golden + [0])?.code == .corrupt)
    }

    /// Flags bit 1: a record stored after another of its id with other bytes keeps the flag
    /// and gets an id of its own, the same for the same bytes.
    @Test func aConflictRoundTripsWithAnIDOfItsOwn() throws {
        let plain = try OriginRecord.decode(Self.golden)
        #expect(!plain.conflict)
        var conflict = plain
        conflict.conflict = true
        #expect(conflict.encoded()[1] == 0x03)
        #expect(try OriginRecord.decode(conflict.encoded()) == conflict)
        #expect(conflict.id.hasPrefix(plain.id + "~") && conflict.id.count == plain.id.count + 17)
        var other = conflict
        other.payload = Array(#"{"a":2}"#.utf8)
        #expect(other.id != conflict.id && other.id.hasPrefix(plain.id + "~"))
        #expect(OriginRecord.eventID(log: conflict.log, seq: conflict.seq, payload: conflict.payload, conflict: true) == conflict.id)
    }

    @Test func versionsFlagsSeqAndTimeAreChecked() {
        var bytes = Self.golden
        bytes[0] = 0
        #expect(decodeError(bytes)?.code == .corrupt)
        bytes[0] = 2
        #expect(decodeError(bytes)?.code == .unsupportedVersion)
        for flags: UInt8 in [0x04, 0x80, 0xff] {
            bytes = Self.golden
            bytes[1] = flags
            #expect(decodeError(bytes)?.message.contains("undefined flags") == true)
        }
        bytes = Self.golden
        bytes.storeLE(UInt64(1) << 62, at: 18)
        #expect(decodeError(bytes)?.message.contains("past the ceiling") == true)
        bytes.storeLE(UInt64(1) << 62 - 1, at: 18)
        #expect((try? OriginRecord.decode(bytes))?.seq == UInt64(1) << 62 - 1)
        bytes = Self.golden
        bytes[1] = 0  // time flag clear, time field not zero
        #expect(decodeError(bytes)?.message.contains("time flag clear") == true)
    }

    @Test func garbageNeverTrapsAndNeverDecodesAsSomethingElse() {
        var generator = SplitMix64(seed: 28)
        for round in 0..<2_000 {
            let count = Int(generator.next() % 80)
            var bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            if round % 2 == 0, bytes.count >= 2 {
                bytes[0] = 1  // get past the version check more often
                bytes[1] &= 1
            }
            if let decoded = try? OriginRecord.decode(bytes) {
                // Only a well-formed record decodes, and it decodes to exactly its bytes.
                #expect(decoded.encoded() == bytes)
            }
        }
    }

    @Test func largeAndEmptyPayloadsRoundTrip() throws {
        for size in [0, 1, 4095, 4096, 65_537, 1 << 20] {
            let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            let record = OriginRecord(log: .random(), seq: UInt64(size), time: Int64(size) - 3, payload: payload)
            #expect(try OriginRecord.decode(record.encoded()) == record)
        }
    }

    @Test func theMarkerIsWrittenOnceBeforeTheFirstRecordAndOnlyThen() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let collectorLog = dir.path + "/collector"
        #expect(!OriginRecord.storesOrigins(at: collectorLog))
        try withEventLog(directory: collectorLog) { log in
            try OriginRecord.markStoresOrigins(log)
            try OriginRecord.markStoresOrigins(log)  // again: nothing to do
            try log.appendBlocking(Self.record.encoded(), durability: .synced)
        }
        #expect(OriginRecord.storesOrigins(at: collectorLog))
        let marker = readFile(collectorLog + "/" + OriginRecord.markerFileName)
        #expect(marker.count == 16)
        #expect(Array(marker[0..<8]) == Array("SPOOLORG".utf8))
        #expect(marker[8] == 1 && marker[9] == 0 && marker[10] == 0 && marker[11] == 0)
        var crc = [UInt8]()
        crc.appendLE(CRC32C.checksum(Array(marker[0..<12])))
        #expect(Array(marker[12..<16]) == crc)
        var info = stat()
        #expect(stat(collectorLog + "/" + OriginRecord.markerFileName, &info) == 0 && info.st_mode & 0o777 == 0o600)
        // It survives a reopen, and the log reads back what was stored.
        try withEventLog(directory: collectorLog) { log in
            try OriginRecord.markStoresOrigins(log)
            let stored = try log.readAll().compactMap { item -> [UInt8]? in
                if case .record(let record) = item { return record.payload }
                return nil
            }
            #expect(try stored.map { try OriginRecord.decode($0) } == [Self.record])
        }

        // A log that already holds other records is refused, and stays unmarked.
        let deviceLog = dir.path + "/device"
        try withEventLog(directory: deviceLog) { log in
            try log.appendBlocking(Array("plain".utf8), durability: .synced)
            #expect(throws: SpoolError.self) { try OriginRecord.markStoresOrigins(log) }
        }
        #expect(!OriginRecord.storesOrigins(at: deviceLog))

        // A link in the marker's place does not mark a log.
        let linked = dir.path + "/linked"
        try FileManager.default.createDirectory(atPath: linked, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: linked + "/" + OriginRecord.markerFileName,
                                                   withDestinationPath: collectorLog + "/" + OriginRecord.markerFileName)
        #expect(!OriginRecord.storesOrigins(at: linked))
    }

    private func decodeError(_ bytes: [UInt8]) -> SpoolError? {
        do {
            _ = try OriginRecord.decode(bytes)
            return nil
        } catch {
            return error
        }
    }
}
