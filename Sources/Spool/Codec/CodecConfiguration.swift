import Foundation

extension Configuration {
    /// Whether blocks are compressed with a zstd dictionary, and where it comes from.
    ///
    /// A dictionary pays off when blocks are small: at a few events per second each block holds
    /// one or a few records, and zstd alone barely shrinks a lone event. Dictionaries are stored
    /// in the log's `dictionaries/` directory (FORMAT.md §8); every block names the one it was
    /// compressed with, so readers need no setting to read them.
    public enum DictionaryPolicy: Sendable, Equatable {
        /// No dictionary for new blocks. The default. Blocks written earlier with one stay readable.
        case none
        /// Use these bytes (a dictionary made by `zstd --train`, or raw content). They are stored
        /// in the log under a new id the first time, unencrypted even in an encrypted log; the
        /// same bytes later reuse that id.
        /// At most 1 MiB.
        case provided([UInt8])
        /// Train a dictionary of at most `size` bytes from the log's own records, once
        /// `afterSamples` records have been written (each record's payload, up to its first
        /// 16 KiB, is a sample). zstd suggests samples totalling about 100 × `size`: with
        /// `size` 16 KiB and ~400-byte events, about 4,000. Training runs on a background
        /// thread; blocks use the dictionary once it is stored. A log that already has a
        /// dictionary keeps using its newest one; ``EventLog/retrainDictionary()`` trains a new one.
        /// `size`: 1 KiB ... 1 MiB. `afterSamples`: 8 ... 1,000,000. Not allowed with encryption
        /// on (a current key): the dictionary, stored in the clear, is made of pieces of the
        /// records (``Configuration/validate()`` refuses it).
        case train(size: Int, afterSamples: Int)

        /// `.train(size: 16 KiB, afterSamples: 4000)`.
        public static let trained = DictionaryPolicy.train(size: 16 * 1024, afterSamples: 4000)
    }

    /// Authenticated encryption of every block's payload (ChaCha20-Poly1305) with keys the app
    /// supplies (on Apple platforms, keep them in the Keychain). Block headers stay in the clear
    /// and inside the checksums, so recovery and corruption checks need no key (FORMAT.md §3.1).
    public struct Encryption: Sendable, Equatable, CustomStringConvertible {
        /// 32-byte keys by key id. Every key that encrypted a block still stored must stay here
        /// for those blocks to be readable.
        public var keys: [UInt32: [UInt8]]
        /// The key id new blocks are encrypted with; nil writes new blocks in the clear (the keys
        /// then only read, as `spool dump --key-file` does).
        public var current: UInt32?

        /// Keys by id (32 bytes each), and the id new blocks are encrypted with.
        public init(keys: [UInt32: [UInt8]], current: UInt32?) {
            self.keys = keys
            self.current = current
        }

        /// The key ids only: keys never appear in descriptions, logs or errors.
        public var description: String {
            "Encryption(keys: \(keys.keys.sorted()), current: \(current.map(String.init) ?? "nil"))"
        }

        /// Parses a key file: one key per line, `<key id> <64 hexadecimal digits>` (the id in
        /// decimal); `#` starts a comment to the end of the line; blank lines are ignored.
        /// - Throws: `.invalidArgument` naming the line that is not of that form, or a repeated id.
        public static func parseKeyFile(_ text: String) throws -> [UInt32: [UInt8]] {
            var keys = [UInt32: [UInt8]]()
            for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                // `#` starts a comment to the end of the line (neither field can hold one).
                let content = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
                let trimmed = content.trimmingCharacters(in: .whitespaces)
                if trimmed.isEmpty { continue }
                let fields = trimmed.split(whereSeparator: { $0 == " " || $0 == "\t" })
                guard fields.count == 2, let id = UInt32(fields[0]), let key = hexBytes(fields[1]), key.count == 32 else {
                    throw SpoolError(.invalidArgument, "key file line \(index + 1) is not '<key id> <64 hex digits>'")
                }
                guard keys[id] == nil else { throw SpoolError(.invalidArgument, "key file line \(index + 1) repeats key id \(id)") }
                keys[id] = key
            }
            return keys
        }
    }

    /// Checks the codec fields (called by ``validate()``).
    func validateCodec(_ fail: (String, String) -> SpoolError) throws {
        switch dictionary {
        case .none: break
        case .provided(let bytes):
            guard (8...Format.maxDictionarySize).contains(bytes.count) else {
                throw fail("dictionary", "is \(bytes.count) bytes; a provided dictionary must be 8 bytes ... 1 MiB")
            }
        case .train(let size, let samples):
            guard (1024...Format.maxDictionarySize).contains(size) else {
                throw fail("dictionary", "trains a dictionary of \(size) bytes; the size must be 1 KiB ... 1 MiB")
            }
            guard (8...1_000_000).contains(samples) else {
                throw fail("dictionary", "trains after \(samples) samples; it must be 8 ... 1,000,000")
            }
        }
        if case .train = dictionary, encryption?.current != nil {
            // A trained dictionary is made of pieces of the records and stored in the clear.
            throw fail("dictionary", "is .train while encryption is on: a trained dictionary is made of fragments of the records and is stored unencrypted (FORMAT.md §8); pass one made from data that is not secret as .provided (EventLog.currentDictionary() of a log that trained it), or use .none")
        }
        if let encryption {
            for (id, key) in encryption.keys where key.count != 32 {
                throw fail("encryption", "key \(id) is \(key.count) bytes; ChaCha20-Poly1305 keys are 32 bytes")
            }
            if let current = encryption.current, encryption.keys[current] == nil {
                throw fail("encryption", "current key \(current) is not one of the keys (\(encryption.keys.keys.sorted()))")
            }
        }
    }
}

/// The bytes of an even number of hexadecimal digits, or nil.
func hexBytes(_ text: Substring) -> [UInt8]? {
    let digits = Array(text.utf8)
    guard digits.count % 2 == 0 else { return nil }
    var out = [UInt8]()
    out.reserveCapacity(digits.count / 2)
    var index = 0
    while index < digits.count {
        guard let high = hexValue(digits[index]), let low = hexValue(digits[index + 1]) else { return nil }
        out.append(high << 4 | low)
        index += 2
    }
    return out
}
