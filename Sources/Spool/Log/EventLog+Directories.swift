extension EventLog {
    /// The folder of a log's dead-letter logs, `deadletter` (`<log>/deadletter/<consumer>`):
    /// recovery leaves it alone rather than listing it as a foreign file.
    public static let deadLetterDirectory = Format.deadLetterDirectory

    /// Creates the directories `components` inside `logDirectory`, each one inside the one
    /// before (`<log>/deadletter/<consumer>` for `["deadletter", consumer]`), refusing any that
    /// is a symbolic link, so what a caller keeps inside a log never lands outside it.
    /// Existing directories are fine; each one created is made durable in its parent.
    ///
    /// - Parameters:
    ///   - components: the names, one per level: no `/`, `.` or `..` (else `.invalidArgument`).
    ///   - logDirectory: the log's directory; it may itself be a link (the caller named it).
    ///   - permissions: the mode of the directories created.
    /// - Returns: the path of the innermost directory.
    /// - Throws: `SpoolError` `.io` naming the path when one of them is a symbolic link or is
    ///   not a directory, or when it cannot be created.
    @discardableResult
    public static func createDirectories(_ components: [String], inside logDirectory: String, permissions: UInt16) throws -> String {
        var path = logDirectory.hasSuffix("/") ? String(logDirectory.dropLast()) : logDirectory
        for component in components {
            guard !component.isEmpty, component != ".", component != "..", !component.contains("/") else {
                throw SpoolError(.invalidArgument, "a directory name must be one path component", path: path)
            }
            path += "/" + component
            try DirectoryIO.create(path, permissions: permissions, insideLog: true)
        }
        return path
    }
}
