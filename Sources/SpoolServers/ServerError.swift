/// Why a server could not start, or a tool it runs failed.
public struct ServerError: Error, CustomStringConvertible {
    /// What failed, with the tool's output when there is one.
    public let description: String
    /// An error that says `description`.
    public init(_ description: String) { self.description = description }
}
