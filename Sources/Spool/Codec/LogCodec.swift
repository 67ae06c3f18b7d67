import Crypto
import Foundation
import Logging
import Synchronization

/// What a log's blocks are encoded with beyond plain zstd: its dictionaries (provided, or trained
/// in the background from sampled records) and its encryption keys. Shared by the writer thread,
/// readers and the training thread.
///
/// Thread-safety: `Sendable`; `prepare` and `didEncode` are called by the writer thread only.
final class LogCodec: Sendable {
    let dictionaries: DictionaryStore
    /// Every supplied key, by id (for reading).
    let keys: [UInt32: SymmetricKey]
    let logID: LogID
    private let encryption: Configuration.Encryption?
    private let policy: Configuration.DictionaryPolicy
    private let logger: Logger

    private struct Training {
        /// Whether the writer should sample records for a (re)training.
        var wanted = false
        var running = false
        var samples: [UInt8] = []
        var sizes: [Int] = []
    }
    private let training = RankedMutex(.training, Training())
    private let trainingGroup = DispatchGroup()
    /// A sample is at most the first 16 KiB of a record; sampling stops at 64 MiB.
    private static let maxSampleSize = 16 * 1024
    private static let maxSampleBytes = 64 * 1024 * 1024

    /// Loads the dictionaries and checks the keys.
    /// - Parameter inheritedThrough: the base of the newest segment at open, if any.
    /// - Parameter readOnly: for a snapshot: only reads (no dictionary is stored, set or
    ///   trained, no key check is written, no temporary file removed).
    /// - Throws: `.authenticationFailed` naming a key that does not match its check file;
    ///   `.io` if a provided dictionary cannot be stored.
    init(directory: String, configuration: Configuration, logID: LogID, inheritedThrough: UInt64?, readOnly: Bool = false,
         logger: Logger) throws {
        var configuration = configuration
        if readOnly {
            configuration.dictionary = .none
            configuration.encryption?.current = nil
        }
        self.logID = logID
        self.logger = logger
        encryption = configuration.encryption
        policy = configuration.dictionary
        keys = (configuration.encryption?.keys ?? [:]).mapValues { SymmetricKey(data: $0) }
        dictionaries = try DictionaryStore(directory: directory, configuration: configuration, inheritedThrough: inheritedThrough,
                                           repairing: !readOnly)
        if let encryption = configuration.encryption {
            try KeyCheck.verify(encryption, logID: logID, directory: directory, configuration: configuration)
        }
        switch configuration.dictionary {
        case .none:
            break
        case .provided(let bytes):
            let id = try dictionaries.find(bytes) ?? dictionaries.add(bytes).id
            try dictionaries.setCurrent(id)
        case .train:
            if let newest = dictionaries.newestID {
                do {
                    try dictionaries.setCurrent(newest)
                } catch {
                    logger.warning("the newest dictionary cannot be loaded; training a new one", metadata: ["error": "\(error)"])
                    training.withLock { $0.wanted = true }
                }
            } else {
                training.withLock { $0.wanted = true }
            }
        }
    }

    /// Sets the encoder's dictionary and key for the next batch. Writer thread, before encoding.
    func prepare(_ encoder: BlockEncoder) {
        let dictionary = dictionaries.forWriter()
        if encoder.dictionary !== dictionary { encoder.dictionary = dictionary }
        if encoder.sealer == nil { encoder.sealer = currentSealer() }
    }

    /// Sets a cold rewrite's encoder: no dictionary (a 1 MiB block gains little from one, and
    /// the rewritten segment then holds no dictionary alive), the current key if the log
    /// encrypts. Any thread (the encoder is the rewrite's own).
    func prepareForRewrite(_ encoder: BlockEncoder) {
        encoder.dictionary = nil
        encoder.sealer = currentSealer()
    }

    /// A sealer for the current encryption key; nil when the log does not encrypt.
    private func currentSealer() -> BlockSealer? {
        guard let current = encryption?.current, let key = keys[current] else { return nil }
        return BlockSealer(keyID: current, key: key, logID: logID)
    }

    /// Notes the dictionary a just-encoded block uses, and samples its records while a
    /// training waits for samples. Writer thread.
    func didEncode(_ block: PendingBlock, header: BlockHeader, segment: UInt64) {
        dictionaries.noteUse(header.dictionaryID, segment: segment)
        guard case .train(let size, let afterSamples) = policy else { return }
        let batch: (samples: [UInt8], sizes: [Int])? = training.withLock { state in
            guard state.wanted, !state.running else { return nil }
            block.raw.withUnsafeBytes { raw in
                var reader = ByteReader(raw)
                while let length = reader.readVarint(), reader.readVarint() != nil,
                      let payload = reader.readBytes(Int(clamping: length)) {
                    let sample = payload.prefix(Self.maxSampleSize)
                    state.samples.append(contentsOf: sample)
                    state.sizes.append(sample.count)
                }
            }
            guard state.sizes.count >= afterSamples || state.samples.count >= Self.maxSampleBytes else { return nil }
            state.running = true
            state.wanted = false
            defer {
                state.samples = []
                state.sizes = []
            }
            return (state.samples, state.sizes)
        }
        guard let batch else { return }
        DispatchQueue.global(qos: .utility).async(group: trainingGroup) { [self] in
            train(size: size, samples: batch.samples, sizes: batch.sizes)
        }
    }

    /// Trains from `samples`, stores the dictionary and makes it current. Training thread.
    private func train(size: Int, samples: [UInt8], sizes: [Int]) {
        defer { training.withLock { $0.running = false } }
        guard let bytes = trainZstdDictionary(size: size, samples: samples, sampleSizes: sizes) else {
            logger.debug("zstd could not train a dictionary from these samples; sampling again", metadata: ["samples": "\(sizes.count)"])
            training.withLock { $0.wanted = true }
            return
        }
        do {
            let dictionary = try dictionaries.add(bytes)
            try dictionaries.setCurrent(dictionary.id)
            logger.debug("trained a dictionary", metadata: ["id": "\(dictionary.id)", "bytes": "\(bytes.count)", "samples": "\(sizes.count)"])
        } catch {
            logger.warning("could not store a trained dictionary; blocks stay compressed without it", metadata: ["error": "\(error)"])
        }
    }

    /// Starts sampling for a new dictionary (a new id); no-op unless the policy trains or while
    /// a training is under way.
    func retrain() {
        guard case .train = policy else { return }
        training.withLock { if !$0.running { $0.wanted = true } }
    }

    /// Waits for a training under way to finish (so no file is written after close).
    func close() {
        trainingGroup.wait()
    }
}
