import SpoolJSON

/// Whether a record is one JSON text (RFC 8259, UTF-8 included), so that it is embedded as JSON
/// (its original bytes, unchanged) rather than as a JSON string: SpoolJSON's scanner, the one
/// grammar the reference collector reads bodies with, with a record's depth limit.
package enum JSONValidator {
    /// The deepest nesting of arrays and objects accepted: 126. A deeper record is sent as
    /// a JSON string instead, so that every body the worker makes fits the reference
    /// collector's limit, which counts the body's own levels too (`JSONScanner.recordMaxDepth`).
    package static let maxDepth = JSONScanner.recordMaxDepth

    /// Whether `bytes` is a single valid JSON text nested at most ``maxDepth`` deep.
    ///
    /// - Complexity: O(bytes); no allocation.
    package static func isValid(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        JSONScanner.isValid(bytes, maxDepth: maxDepth)
    }
}
