import Foundation
import Testing

/// Issue 50, item 5, from outside: a synced watermark behind the durable end (here `SYNCED`
/// copied from a new, empty log: 0) and one flipped byte inside the active segment. Intact,
/// checksum-valid blocks after damage are corruption's evidence, never a torn write's: `verify`
/// reports the damage, and the next append cuts nothing.
@Suite struct SalvageTests {
    @Test func aForgedWatermarkNeverLetsAnAppendCutIntactRecords() throws {
        let dir = temporaryDirectory()
        let empty = temporaryDirectory() + "-empty"
        defer {
            try? FileManager.default.removeItem(atPath: dir)
            try? FileManager.default.removeItem(atPath: empty)
        }
        for chunk in 0..<5 {
            let input = (0..<100).map { "{\"chunk\":\(chunk),\"n\":\($0),\"pad\":\"\(String(repeating: "y", count: 40))\"}\n" }.joined()
            #expect(try SpoolBinary.run(["append", dir, "--durability", "synced"], input: Data(input.utf8)).status == 0)
        }
        let segment = dir + "/00000000000000000000.seg"
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: segment)))
        bytes[bytes.count * 3 / 10] ^= 0x01
        try Data(bytes).write(to: URL(fileURLWithPath: segment))
        #expect(try SpoolBinary.run(["append", empty], input: Data()).status == 0)
        try FileManager.default.removeItem(atPath: dir + "/SYNCED")
        try FileManager.default.copyItem(atPath: empty + "/SYNCED", toPath: dir + "/SYNCED")

        let verify = try SpoolBinary.run(["verify", dir, "--json"])
        #expect(verify.status == 1, "the flipped byte is corruption: \(verify.stdout)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(verify.stdout.utf8)) as? [String: Any])
        let corrupt = try #require(report["corrupt"] as? [[String: Any]])
        #expect(corrupt.count == 1)
        let lost = corrupt.first?["records"] as? Int ?? 0
        #expect(lost > 0 && lost < 500)
        #expect(!verify.stdout.contains("torn"), "no torn tail: \(verify.stdout)")

        #expect(try SpoolBinary.run(["append", dir], input: Data("{\"after\":true}\n".utf8)).status == 0)
        let dump = try SpoolBinary.run(["dump", dir])
        #expect(dump.status == 0)
        let stored = lines(of: dump.stdout).count
        #expect(stored == 500 - lost + 1, "every intact record is still there: \(stored), \(lost) lost")
        #expect(dump.stdout.contains("\"chunk\":4,\"n\":99"), "the last record before the append is kept")
    }
}
