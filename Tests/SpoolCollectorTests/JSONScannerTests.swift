import Testing
@testable import SpoolCollector
import SpoolJSON

/// The scanner accepts exactly RFC 8259 JSON and never traps on anything else.
@Suite struct JSONScannerTests {
    private func isValid(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        return (try? JSONScanner.singleValue(of: bytes, in: bytes.indices)) != nil
    }

    @Test(arguments: [
        "0", "-0", "12", "-3.25", "1e9", "1E+2", "2.5e-3", "true", "false", "null", #""""#, #""a\"b\\c\/\b\f\n\r\t\u00e9\uD83D\uDE00""#,
        "[]", "[1,2]", "{}", #"{"a":1,"b":[{}]}"#, " \t\r\n[ 1 , { \"k\" : null } ] \n", "\"é — ✓\"",
    ])
    func validJSONIsAccepted(text: String) {
        #expect(isValid(text))
    }

    @Test(arguments: [
        "", " ", "01", "-", "1.", ".5", "1e", "+1", "0x10", "NaN", "tru", "nul", "True", "\"abc", #""\x""#, #""\u12G4""#,
        "\"tab\there\"", "[1,]", "[,1]", "[1 2]", "{\"a\"}", "{\"a\":}", "{a:1}", "{\"a\":1,}", "[1]]", "1 2", "[", "{", "}",
    ])
    func invalidJSONIsRefused(text: String) {
        #expect(!isValid(text))
    }

    @Test func nestingIsLimited() {
        let ok = String(repeating: "[", count: JSONScanner.maxDepth) + String(repeating: "]", count: JSONScanner.maxDepth)
        let tooDeep = "[" + ok + "]"
        #expect(isValid(ok))
        #expect(!isValid(tooDeep))
    }

    @Test func everyPrefixOfADocumentIsRefusedWithoutTrapping() {
        let document = Array(#"[{"id":"x-1","seq":1,"time":-5,"data":{"a":[1.5e3,true,null,"s\u00e9"]}}]"#.utf8)
        for end in 0..<document.count {
            #expect((try? JSONScanner.arrayElements(of: document, in: 0..<end)) == nil, "prefix of \(end) bytes")
        }
        #expect((try? JSONScanner.arrayElements(of: document, in: document.indices))?.count == 1)
    }

    @Test func elementsAndMembersAreFoundByRange() throws {
        let bytes = Array(#"[ 1 , "two" , {"k" : [3]} ]"#.utf8)
        let elements = try JSONScanner.arrayElements(of: bytes, in: bytes.indices)
        #expect(elements.map { String(decoding: bytes[$0], as: UTF8.self) } == ["1", #""two""#, #"{"k" : [3]}"#])
        let members = try JSONScanner.objectMembers(of: bytes, in: elements[2])
        #expect(members.map { String(decoding: bytes[$0.key], as: UTF8.self) } == ["k"])
        #expect(members.map { String(decoding: bytes[$0.value], as: UTF8.self) } == ["[3]"])
    }

    @Test func compactingRemovesWhitespaceOutsideStringsOnly() {
        let bytes = Array("{ \"a b\" :\n[ 1,\t\"x \\\" y\" ] }".utf8)
        #expect(String(decoding: JSONScanner.compacted(bytes, bytes.indices), as: UTF8.self) == #"{"a b":[1,"x \" y"]}"#)
    }
}
