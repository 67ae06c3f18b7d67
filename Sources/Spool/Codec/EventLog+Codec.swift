extension EventLog {
    /// Starts training a new dictionary (a new id) from the next records written, when
    /// ``Configuration/dictionary`` is ``Configuration/DictionaryPolicy/train(size:afterSamples:)``;
    /// otherwise does nothing. Returns at once: sampling happens on the writer thread, training
    /// on a background thread, and blocks use the new dictionary once it is stored. Blocks written
    /// with the previous one keep it; its file is deleted once no stored block uses it.
    public func retrainDictionary() {
        codec.retrain()
    }

    /// The id of the dictionary new blocks are compressed with, or nil for none.
    public var currentDictionaryID: UInt32? { codec.dictionaries.currentID }

    /// The bytes of the dictionary new blocks are compressed with, or nil for none: to keep a
    /// dictionary trained here (from data that is not secret) and hand it to another log as
    /// ``Configuration/DictionaryPolicy/provided(_:)``, which is how an encrypted log gets one.
    /// - Throws: `.missingDictionary` when its file is absent or damaged.
    public func currentDictionary() throws -> [UInt8]? {
        guard let id = codec.dictionaries.currentID else { return nil }
        return try codec.dictionaries.dictionary(id).bytes
    }
}
