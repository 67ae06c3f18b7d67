/// Why a server could not start, or a tool it runs failed.
package struct ServerError: Error, CustomStringConvertible {
    /// What failed, with the tool's output when there is one.
    package let description: String
    /// An error that says `description`.
    package init(_ description: String) { self.description = description }
}
