import Foundation
import Spool

/// Bytes on disk per event when events trickle in one at a time (a real app's few events per
/// second): every event is appended at `written` and acknowledged before the next, so every
/// block holds one event (behind a compact 20-byte block header, FORMAT.md §3.2).
package struct TrickleFigures: Sendable, Codable {
    /// Events measured in each configuration.
    package var events: Int
    /// Mean event (payload) size in bytes.
    package var meanEventBytes: Double
    /// Bytes on disk per event, zstd without a dictionary.
    package var noDictionary: Double
    /// Bytes on disk per event once the log's trained dictionary is in use (steady state:
    /// the events appended while it trained are not counted).
    package var trainedDictionary: Double
    /// The same with encryption at rest on (ChaCha20-Poly1305: 32 more bytes a block), the
    /// trained dictionary provided (an encrypted log may not train one).
    package var trainedDictionaryEncrypted: Double
    /// Events appended before the trained dictionary was in use (the sampling warm-up).
    package var warmUpEvents: Int
    /// Bytes of the trained dictionary's file: stored once per log, not per event, so not in
    /// the per-event figures.
    package var dictionaryFileBytes: Int
}

/// Trickles `count` events (cycling `events`) into fresh logs under `directory`: once with no
/// dictionary, then with a dictionary the log trains from its own records (16 KiB, after
/// `trainAfter` samples; the warm-up is excluded from the figure), then encrypted with that
/// same dictionary provided.
/// Bytes are the growth of the log's segment files, so segment headers are included; the
/// dictionary's own file is reported apart (``TrickleFigures/dictionaryFileBytes``).
/// Blocking; takes a few seconds (each event waits for its `write`).
package func trickleBytesPerEvent(events: EventSet, count: Int = 10_000, trainAfter: Int = 4000,
                                 directory: String, configuration: Configuration = .init()) throws -> TrickleFigures {
    var dictionaryFileBytes = 0
    var trainedBytes: [UInt8] = []
    /// `from`: the first event appended (the encrypted run skips the events the dictionary was
    /// trained on, as the clear run's measured events do).
    func run(_ name: String, dictionary: Configuration.DictionaryPolicy, encrypted: Bool, from: Int = 0) throws -> (perEvent: Double, warmUp: Int) {
        var configuration = configuration
        configuration.dictionary = dictionary
        if encrypted {
            configuration.encryption = .init(keys: [1: (0..<32).map { UInt8($0) }], current: 1)
        }
        let path = directory + "/trickle-" + name
        try? FileManager.default.removeItem(atPath: path)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let log = try EventLog.open(directory: path, configuration: configuration, logger: quietLogger)
        defer { try? log.close() }
        var index = from
        if case .train = dictionary {
            // Warm-up: sample and train, then wait (bounded) until new blocks use the dictionary.
            let deadline = monotonicNanos() + 120_000_000_000
            while log.currentDictionaryID == nil, monotonicNanos() < deadline {
                try log.appendBlocking(events[cycling: index], durability: .written)
                index += 1
            }
            guard log.currentDictionaryID != nil else {
                throw SpoolError(.invalidArgument, "trickle: no dictionary was trained after \(index) events")
            }
            dictionaryFileBytes = bytesOnDisk(path + "/" + "dictionaries")
            trainedBytes = try log.currentDictionary() ?? []
        }
        let warmUp = index
        let before = try log.summary().diskBytes
        for _ in 0..<count {
            try log.appendBlocking(events[cycling: index], durability: .written)
            index += 1
        }
        let after = try log.summary().diskBytes
        return (Double(after - before) / Double(count), warmUp)
    }
    let plain = try run("plain", dictionary: .none, encrypted: false)
    let policy = Configuration.DictionaryPolicy.train(size: 16 * 1024, afterSamples: trainAfter)
    let trained = try run("dictionary", dictionary: policy, encrypted: false)
    // An encrypted log may not train (its dictionary would hold pieces of the records in the
    // clear): it is given the dictionary the clear log trained, as an app would ship one.
    let encrypted = try run("encrypted", dictionary: .provided(trainedBytes), encrypted: true, from: trained.warmUp)
    return TrickleFigures(events: count, meanEventBytes: events.meanSize, noDictionary: plain.perEvent,
                          trainedDictionary: trained.perEvent, trainedDictionaryEncrypted: encrypted.perEvent,
                          warmUpEvents: trained.warmUp, dictionaryFileBytes: dictionaryFileBytes)
}
