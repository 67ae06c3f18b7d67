import ArgumentParser
import Foundation

/// `--json`: a command's result as one JSON object on one line of standard output, for scripts
/// (`jq`, or any JSON parser). Keys are snake_case and sorted, so the output is stable; the
/// schemas are documented in the command-line article (CommandLine.md). Exit codes are the
/// same as without it.
struct JSONOption: ParsableArguments {
    @Flag(help: "Print the result as one JSON object (the schema is in the command-line article) instead of text.")
    var json = false
}

extension Output {
    /// The encoder of every JSON output: snake_case keys, sorted, `/` left unescaped.
    static func jsonEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    /// `value` as one line of JSON.
    static func jsonLine(_ value: some Encodable, encoder: JSONEncoder = jsonEncoder()) throws -> String {
        String(decoding: try encoder.encode(value), as: UTF8.self) + "\n"
    }

    /// Writes `value` as one line of JSON on standard output.
    static func writeJSON(_ value: some Encodable) throws {
        try write(try jsonLine(value))
    }
}
