import Foundation
@testable import Spool

/// A zstd dictionary trained on `payload(i)` records (deterministic: same samples, same bytes).
func codecTestDictionary(size: Int = 4096) -> [UInt8] {
    let samples = (0..<600).map { payload($0 &* 31) }
    return trainZstdDictionary(size: size, samples: samples.flatMap { $0 }, sampleSizes: samples.map(\.count))!
}

/// A fixed 32-byte key, different for each `seed`.
func codecTestKey(_ seed: UInt8) -> [UInt8] { (0..<32).map { UInt8($0) &* 7 &+ seed } }

/// Every block header of a segment file, with its offset.
func blockHeaders(_ bytes: [UInt8]) -> [(offset: Int, header: BlockHeader)] {
    var blocks = [(offset: Int, header: BlockHeader)]()
    var offset = Format.segmentHeaderSize
    let base = bytes.withUnsafeBytes { loadLE($0, 16, as: UInt64.self) }
    while offset + Format.compactBlockHeaderSize <= bytes.count {
        let end = min(bytes.count, offset + Format.blockHeaderSize)
        guard case .success(let header) = bytes.withUnsafeBytes({ BlockHeader.parse(UnsafeRawBufferPointer(rebasing: $0[offset..<end]), segmentBase: base) }) else { break }
        blocks.append((offset, header))
        offset += header.totalSize
    }
    return blocks
}

/// Appends `payloads` one at a time, each acknowledged at `written` before the next (one block each).
@discardableResult
func trickle(_ log: EventLog, _ payloads: [[UInt8]]) throws -> [UInt64] {
    try payloads.map { try log.appendBlocking($0, durability: .written) }
}

/// Polls `condition` every 10 ms for up to `seconds`.
func eventually(seconds: Double = 20, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        Thread.sleep(forTimeInterval: 0.01)
    }
    return try condition()
}

/// A configuration that compresses with `dictionary` and, if `key` is set, encrypts with it as key `keyID`.
func codecConfiguration(dictionary: Configuration.DictionaryPolicy = .none, key: [UInt8]? = nil, keyID: UInt32 = 7,
                        segmentSize: Int = 64 * 1024) -> Configuration {
    var configuration = smallConfiguration(blockSize: 1024, segmentSize: segmentSize)
    configuration.dictionary = dictionary
    if let key { configuration.encryption = .init(keys: [keyID: key], current: keyID) }
    return configuration
}
