import Testing
@testable import Spool

/// A log id is its 16 bytes, whichever way it is made or read back.
@Suite struct LogIDTests {
    @Test func bytesHexAndAppendingAgree() {
        let bytes: [UInt8] = [0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]
        let id = LogID(bytes: bytes)
        #expect(id.bytes == bytes)
        #expect(id.description == "00112233445566778899aabbccddeeff")
        #expect(LogID(hex: "00112233445566778899AABBCCDDEEFF") == id)
        #expect(LogID(bytes: bytes[...]) == id)
        var out: [UInt8] = [7]
        id.append(to: &out)
        #expect(out == [7] + bytes)
        #expect(id.eventID(seq: 42) == "00112233445566778899aabbccddeeff-42")
    }

    @Test func idsAreEqualExactlyWhenTheirBytesAre() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let a = LogID.random()
            #expect(LogID(bytes: a.bytes) == a)
            #expect(LogID(hex: a.description) == a)
            var changed = a.bytes
            changed[Int.random(in: 0..<16, using: &generator)] ^= UInt8.random(in: 1...255, using: &generator)
            let b = LogID(bytes: changed)
            #expect(b != a)
            #expect(Set([a, b, LogID(bytes: a.bytes)]).count == 2)
        }
    }

    @Test func malformedHexIsNotAnID() {
        #expect(LogID(hex: "") == nil)
        #expect(LogID(hex: String(repeating: "0", count: 31)) == nil)
        #expect(LogID(hex: String(repeating: "0", count: 33)) == nil)
        #expect(LogID(hex: String(repeating: "g", count: 32)) == nil)
    }
}
