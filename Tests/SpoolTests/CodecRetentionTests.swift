import Foundation
import Testing
@testable import Spool

/// A dictionary file lives exactly as long as a stored block names it.
@Suite struct CodecRetentionTests {
    @Test func dictionaryIsDeletedOnlyOnceRetentionRemovesTheLastSegmentUsingIt() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        func configuration(_ dictionary: [UInt8]) -> Configuration {
            var configuration = codecConfiguration(dictionary: .provided(dictionary), segmentSize: 64 * 1024)
            configuration.blockSize = 4096
            configuration.linger = .zero
            return configuration
        }
        let first = codecTestDictionary(size: 2048)
        let second = codecTestDictionary(size: 4096)
        // Dictionary 1 for records 0..<300 (several segments), written by an earlier process.
        var log = try EventLog.open(directory: dir.path, configuration: configuration(first))
        _ = try log.consumer(named: "c")  // starts at 0: retention keeps everything until it commits
        for i in 0..<300 { try log.append(noisyPayload(i, size: 900)) }
        try log.syncBlocking()
        try log.close()
        // Dictionary 2 from here on.
        log = try EventLog.open(directory: dir.path, configuration: configuration(second))
        #expect(log.currentDictionaryID == 2)
        for i in 300..<600 { try log.append(noisyPayload(i, size: 900)) }
        try log.syncBlocking()
        let dictionaryFiles = { (try? DirectoryIO.list(dir.file("dictionaries")).sorted()) ?? [] }
        #expect(dictionaryFiles() == [Format.dictionaryName(1), Format.dictionaryName(2)])
        let segments = dir.segments()
        let bases = segments.map { Format.baseSeq(ofSegmentNamed: $0)! }
        // The segment holding seq 299 (dictionary 1's last block) and the one after it.
        let lastWithFirst = bases.lastIndex { $0 <= 299 }!
        #expect(lastWithFirst + 1 < bases.count - 1)
        let reader = try log.consumer(named: "c")
        // Passing every segment but the last one using dictionary 1 keeps the file.
        try reader.commit(upTo: bases[lastWithFirst])
        #expect(dir.segments().first == segments[lastWithFirst])
        #expect(dictionaryFiles() == [Format.dictionaryName(1), Format.dictionaryName(2)])
        // Passing it deletes the file; dictionary 2 (current) stays.
        try reader.commit(upTo: bases[lastWithFirst + 1])
        #expect(dir.segments().first == segments[lastWithFirst + 1])
        #expect(dictionaryFiles() == [Format.dictionaryName(2)])
        #expect(records(try log.readAll()).map(\.seq).first == bases[lastWithFirst + 1])
        try log.close()
        // Reopened without any dictionary setting, everything left still reads; dictionary 2
        // stays while blocks use it, though it is no longer current.
        log = try EventLog.open(directory: dir.path)
        #expect(notices(try log.readAll()).isEmpty)
        try log.append(noisyPayload(600, size: 900))
        try log.syncBlocking()
        try log.consumer(named: "c").commit(upTo: bases[bases.count - 1])
        #expect(dictionaryFiles() == [Format.dictionaryName(2)])
        try log.close()
    }
}
