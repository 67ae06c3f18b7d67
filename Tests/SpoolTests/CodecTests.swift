import Foundation
import Testing
@testable import Spool

/// Dictionaries and encryption: round trips across reopen and retraining, and clear failures
/// when a dictionary or a key is missing or wrong.
@Suite struct CodecTests {
    @Test(arguments: [false, true], [false, true])
    func roundTripAcrossReopen(withDictionary: Bool, encrypted: Bool) throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let dictionary = codecTestDictionary()
        let configuration = codecConfiguration(dictionary: withDictionary ? .provided(dictionary) : .none,
                                               key: encrypted ? codecTestKey(1) : nil)
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        try trickle(log, (0..<40).map { payload($0) })
        for i in 40..<140 { try log.append(payload(i)) }  // and some multi-record blocks
        try log.close()

        let reopened = try EventLog.open(directory: dir.path, configuration: configuration)
        #expect(records(try reopened.readAll()).map(\.payload) == (0..<140).map { payload($0) })
        try trickle(reopened, (140..<150).map { payload($0) })
        #expect(records(try reopened.readAll()).map(\.payload) == (0..<150).map { payload($0) })
        #expect(try reopened.verify().isClean)
        try reopened.close()

        let bytes = readFile(dir.file(Format.segmentName(0)))
        let headers = blockHeaders(bytes).map(\.header)
        #expect(headers.last?.endSeq == 150)
        #expect(headers.allSatisfy { $0.isEncrypted == encrypted })
        #expect(headers.contains { $0.dictionaryID == (withDictionary ? 1 : 0) && $0.codec == Format.codecZstd })
        #expect(headers.allSatisfy { $0.dictionaryID == (withDictionary && $0.codec == Format.codecZstd ? 1 : 0) })
        if encrypted {
            // No payload text is stored in the clear.
            #expect(bytes.firstRange(of: Array("screen_view".utf8)) == nil)
            #expect(DirectoryIO.exists(dir.file("keys/" + Format.keyCheckName(7))))
        }
        if withDictionary {
            #expect(try DirectoryIO.list(dir.file("dictionaries")) == [Format.dictionaryName(1)])
        }
    }

    @Test func dictionaryShrinksLoneEvents() throws {
        var sizes = [Int]()
        for policy in [Configuration.DictionaryPolicy.none, .provided(codecTestDictionary())] {
            let dir = TemporaryDirectory()
            defer { dir.cleanup() }
            let log = try EventLog.open(directory: dir.path, configuration: codecConfiguration(dictionary: policy))
            try trickle(log, (1000..<1100).map { payload($0, size: 20) })
            try log.close()
            sizes.append(blockHeaders(readFile(dir.file(Format.segmentName(0)))).reduce(0) { $0 + Int($1.header.storedLength) })
        }
        #expect(sizes[1] * 2 < sizes[0], "stored payload bytes: \(sizes)")
    }

    @Test func sameProvidedBytesReuseTheirIDAndNewBytesGetANewOne() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let first = codecTestDictionary(size: 2048)
        let second = codecTestDictionary(size: 4096)
        for (bytes, expected) in [(first, UInt32(1)), (first, 1), (second, 2), (first, 1)] {
            let log = try EventLog.open(directory: dir.path, configuration: codecConfiguration(dictionary: .provided(bytes)))
            #expect(log.currentDictionaryID == expected)
            try trickle(log, [payload(Int(log.nextSeq))])
            try log.close()
        }
        let headers = blockHeaders(readFile(dir.file(Format.segmentName(0)))).map(\.header.dictionaryID)
        #expect(headers == [1, 1, 2, 1])
        let log = try EventLog.open(directory: dir.path)
        #expect(log.currentDictionaryID == nil)
        #expect(records(try log.readAll()).map(\.payload) == (0..<4).map { payload($0) })
        try log.close()
    }

    @Test func trainsAfterEnoughSamplesAndRetrainsWithANewID() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let configuration = codecConfiguration(dictionary: .train(size: 4096, afterSamples: 300))
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        var n = 0
        func more(_ count: Int) throws {
            try trickle(log, (n..<n + count).map { payload($0) })
            n += count
        }
        try more(300)
        #expect(eventually { log.currentDictionaryID == 1 })
        try more(50)
        log.retrainDictionary()
        try more(300)
        #expect(eventually { log.currentDictionaryID == 2 })
        try more(50)
        try log.close()

        let ids = blockHeaders(readFile(dir.file(Format.segmentName(0)))).map(\.header.dictionaryID)
        #expect(ids.prefix(300).allSatisfy { $0 == 0 })
        #expect(ids.contains(1) && ids.last == 2)
        #expect(try DirectoryIO.list(dir.file("dictionaries")).sorted() == [Format.dictionaryName(1), Format.dictionaryName(2)])
        // A reopened log keeps its newest dictionary and reads blocks of every generation.
        let reopened = try EventLog.open(directory: dir.path, configuration: configuration)
        #expect(reopened.currentDictionaryID == 2)
        #expect(records(try reopened.readAll()).map(\.payload) == (0..<n).map { payload($0) })
        try reopened.close()
    }

    @Test func aDictionaryTrainedInTheClearServesAnEncryptedLogAsProvided() throws {
        let clear = TemporaryDirectory()
        let secret = TemporaryDirectory()
        defer { clear.cleanup(); secret.cleanup() }
        let trainer = try EventLog.open(directory: clear.path, configuration: codecConfiguration(dictionary: .train(size: 4096, afterSamples: 300)))
        #expect(try trainer.currentDictionary() == nil)
        try trickle(trainer, (0..<300).map { payload($0) })
        #expect(eventually { trainer.currentDictionaryID == 1 })
        let trained = try #require(try trainer.currentDictionary())
        try trainer.close()
        #expect(trained.count > 0 && trained.count <= 4096)
        #expect(Array(readFile(clear.file("dictionaries/" + Format.dictionaryName(1))).dropFirst(Format.dictionaryHeaderSize)) == trained)

        let configuration = codecConfiguration(dictionary: .provided(trained), key: codecTestKey(5))
        let log = try EventLog.open(directory: secret.path, configuration: configuration)
        try trickle(log, (0..<20).map { payload($0) })
        #expect(log.currentDictionaryID == 1)
        #expect(records(try log.readAll()).map(\.payload) == (0..<20).map { payload($0) })
        try log.close()
        let headers = blockHeaders(readFile(secret.file(Format.segmentName(0)))).map(\.header)
        #expect(!headers.isEmpty && headers.allSatisfy { $0.dictionaryID == 1 && $0.flags & Format.flagEncrypted != 0 })
    }

    @Test func readerWithoutTheDictionaryFailsClearlyAndResumesOnceItIsBack() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path, configuration: codecConfiguration(dictionary: .provided(codecTestDictionary())))
        try trickle(log, (0..<10).map { payload($0) })
        try log.close()
        let file = dir.file("dictionaries/" + Format.dictionaryName(1))
        let saved = readFile(file)
        try FileManager.default.moveItem(atPath: file, toPath: file + ".aside")
        let reopened = try EventLog.open(directory: dir.path)
        let reader = reopened.reader()
        #expect { try reader.next() } throws: { error in
            let e = error as! SpoolError
            return e.code == .missingDictionary && e.message.contains("dictionary 1") && e.message.contains("offset 64")
        }
        #expect(reader.position == 0, "the reader stays on the block")
        writeFile(file, saved)
        var read = [Record]()
        while let item = try reader.next() { if case .record(let r) = item { read.append(r) } }
        #expect(read.map(\.payload) == (0..<10).map { payload($0) })
        // A damaged dictionary file is refused the same way, never decoded into garbage.
        var damaged = saved
        damaged[damaged.count - 1] ^= 1
        writeFile(file, damaged)
        try reopened.close()
        let again = try EventLog.open(directory: dir.path)
        #expect { try again.readAll() } throws: { ($0 as! SpoolError).code == .missingDictionary && "\($0)".contains("damaged") }
        try again.close()
    }

    @Test func missingKeyFailsNamingTheKeyID() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path, configuration: codecConfiguration(key: codecTestKey(1), keyID: 42))
        try trickle(log, (0..<5).map { payload($0) })
        try log.close()
        // Recovery needs no key; reading does.
        let reopened = try EventLog.open(directory: dir.path)
        #expect(reopened.nextSeq == 5)
        #expect { try reopened.readAll() } throws: { error in
            let e = error as! SpoolError
            return e.code == .missingKey && e.message.contains("key 42") && e.message.contains("records 0..<1")
        }
        try reopened.close()
        // Another key under another id does not help either.
        var other = Configuration()
        other.encryption = .init(keys: [1: codecTestKey(9)], current: nil)
        let withOther = try EventLog.open(directory: dir.path, configuration: other)
        #expect { try withOther.readAll() } throws: { ($0 as! SpoolError).code == .missingKey && "\($0)".contains("key 42") }
        try withOther.close()
    }

    @Test func wrongKeyIsRefusedAtOpenNamingTheKeyID() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path, configuration: codecConfiguration(key: codecTestKey(1), keyID: 42))
        try trickle(log, [payload(0)])
        try log.close()
        var wrong = Configuration()
        wrong.encryption = .init(keys: [42: codecTestKey(2)], current: nil)
        #expect { try EventLog.open(directory: dir.path, configuration: wrong) } throws: { error in
            let e = error as! SpoolError
            return e.code == .authenticationFailed && e.message.contains("key 42")
        }
        // Read-only keys (current nil) read, and new blocks are then written in the clear.
        var readOnly = Configuration()
        readOnly.encryption = .init(keys: [42: codecTestKey(1)], current: nil)
        let reader = try EventLog.open(directory: dir.path, configuration: readOnly)
        try trickle(reader, [payload(1)])
        #expect(records(try reader.readAll()).map(\.payload) == [payload(0), payload(1)])
        try reader.close()
        #expect(blockHeaders(readFile(dir.file(Format.segmentName(0)))).map(\.header.isEncrypted) == [true, false])
    }

    @Test func keyRotationReadsOldBlocksWithTheOldKey() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var configuration = codecConfiguration(dictionary: .provided(codecTestDictionary()), key: codecTestKey(1), keyID: 1)
        var log = try EventLog.open(directory: dir.path, configuration: configuration)
        try trickle(log, (0..<5).map { payload($0) })
        try log.close()
        configuration.encryption = .init(keys: [1: codecTestKey(1), 2: codecTestKey(2)], current: 2)
        log = try EventLog.open(directory: dir.path, configuration: configuration)
        try trickle(log, (5..<10).map { payload($0) })
        #expect(records(try log.readAll()).map(\.payload) == (0..<10).map { payload($0) })
        try log.close()
        let keyIDs = blockHeaders(readFile(dir.file(Format.segmentName(0)))).map { block in
            readFile(dir.file(Format.segmentName(0)))[(block.offset + block.header.headerSize)..<(block.offset + block.header.headerSize + 4)].enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (8 * $1.offset) }
        }
        #expect(keyIDs == [1, 1, 1, 1, 1, 2, 2, 2, 2, 2])
    }

    @Test func invalidCodecSettingsAreRefusedNamingTheField() {
        var configurations = [(String, Configuration)]()
        var c = Configuration()
        c.dictionary = .provided([1, 2, 3])
        configurations.append(("dictionary", c))
        c = Configuration()
        c.dictionary = .train(size: 100, afterSamples: 1000)
        configurations.append(("dictionary", c))
        c = Configuration()
        c.dictionary = .train(size: 16384, afterSamples: 1)
        configurations.append(("dictionary", c))
        c = Configuration()
        c.encryption = .init(keys: [1: [1, 2, 3]], current: 1)
        configurations.append(("encryption", c))
        c = Configuration()
        c.encryption = .init(keys: [1: codecTestKey(1)], current: 2)
        configurations.append(("encryption", c))
        // A trained dictionary holds pieces of the records in the clear: not with encryption on.
        c = Configuration()
        c.dictionary = .trained
        c.encryption = .init(keys: [1: codecTestKey(1)], current: 1)
        configurations.append(("dictionary", c))
        for (field, configuration) in configurations {
            #expect { try configuration.validate() } throws: { error in
                let e = error as! SpoolError
                return e.code == .invalidConfiguration && e.message.hasPrefix("Configuration.\(field) ")
            }
        }
        c = Configuration()
        c.dictionary = .provided(codecTestDictionary())
        c.encryption = .init(keys: [1: codecTestKey(1)], current: 1)
        #expect(throws: Never.self) { try c.validate() }
        #expect(!"\(c.encryption!)".contains("\(codecTestKey(1))"))
        // Keys that only read (nothing new is encrypted) leave training allowed.
        c.dictionary = .trained
        c.encryption?.current = nil
        #expect(throws: Never.self) { try c.validate() }
    }

    @Test func keyFileParsesAndRejectsMalformedLines() throws {
        let hex = codecTestKey(3).map { String(format: "%02x", $0) }.joined()
        let keys = try Configuration.Encryption.parseKeyFile("# keys\n\n7 \(hex)\n  8\t\(hex.uppercased())  \n")
        #expect(keys == [7: codecTestKey(3), 8: codecTestKey(3)])
        // A comment after a key, with or without space before it.
        #expect(try Configuration.Encryption.parseKeyFile("7 \(hex) # laptop\n8 \(hex)#spare\n") == [7: codecTestKey(3), 8: codecTestKey(3)])
        for bad in ["7 abc", "x \(hex)", "7 \(hex) extra", "7 \(hex)\n7 \(hex)", "7 \(hex.dropLast())g"] {
            #expect { try Configuration.Encryption.parseKeyFile(bad) } throws: { ($0 as! SpoolError).code == .invalidArgument }
        }
    }
}
