import Logging
import Metrics

/// A shared directory that several writer processes append to: an app and its extensions in
/// an App Group container, or several services on one host.
///
/// Each writer owns a log of its own, `<group>/writers/<name>/`, made on its first open
/// (``EventLog/open(group:writer:configuration:logger:metricsFactory:)``). Writers never share
/// a file or a lock, so they never block or corrupt each other; each log has its own id, so
/// every record's id (`<log id>-<seq>`) stays unique across the group. One sync worker drains
/// them all (`SyncGroup` in SpoolSync, `spool sync DIR --group`) through a consumer of its own
/// in each writer log, committing each log's offset separately; each writer's retention
/// honours that consumer's offset as it does any detached consumer's. FORMAT.md §12 has the
/// layout.
public enum LogGroup {
    /// The directory, inside a group, that holds one log per writer.
    public static let writersDirectoryName = "writers"

    /// The directory of writer `writer`'s log in `group`: `<group>/writers/<writer>`.
    /// - Throws: `.invalidArgument` if the name is not 1 to 64 characters from
    ///   `A-Z a-z 0-9 . _ -` (not starting with a dot).
    public static func directory(group: String, writer: String) throws -> String {
        try validate(writer: writer)
        return writersDirectory(of: group) + "/" + writer
    }

    /// The writers of `group` that have a log (a `META` file), sorted by name. Names that are
    /// not writer names, and directories a writer is still creating, are left out.
    /// - Throws: `.io` if the group's `writers/` directory exists but cannot be listed.
    public static func writers(in group: String) throws -> [String] {
        let folder = writersDirectory(of: group)
        guard DirectoryIO.exists(folder) else { return [] }
        return try DirectoryIO.list(folder).filter { name in
            (try? validate(writer: name)) != nil && DirectoryIO.exists(folder + "/" + name + "/" + Format.metaFileName)
        }.sorted()
    }

    /// Whether `directory` is a group: it has a `writers/` directory.
    public static func isGroup(_ directory: String) -> Bool {
        DirectoryIO.exists(writersDirectory(of: directory))
    }

    static func writersDirectory(of group: String) -> String { group + "/" + writersDirectoryName }

    static func validate(writer name: String) throws {
        do {
            try Consumers.validate(name)
        } catch {
            throw SpoolError(.invalidArgument, "writer name \"\(name.prefix(80))\" is invalid: use 1 to 64 characters from A-Z a-z 0-9 . _ - (not starting with a dot)")
        }
    }
}

extension EventLog {
    /// Opens writer `writer`'s log in the shared directory `group` (``LogGroup``), creating the
    /// group, its `writers/` directory and the log (each mode `directoryMode`) on first use.
    ///
    /// One process per writer name: a second open of the same name gets `.locked`, as for any
    /// log. Use one name per target (`app`, `widget`, `notification-service`, ...).
    /// - Parameters:
    ///   - group: the shared directory (an App Group container's subdirectory, say).
    ///   - writer: this writer's name; 1 to 64 characters from `A-Z a-z 0-9 . _ -`.
    ///   - configuration: the log's settings; validated here.
    ///   - logger: where the log logs, never payloads.
    ///   - metricsFactory: where the `spool_*` metrics go; the process-wide `MetricsSystem`
    ///     when nil.
    /// - Throws: `.invalidArgument` for a bad writer name; what
    ///   ``open(directory:configuration:logger:metricsFactory:)`` throws.
    public static func open(group: String, writer: String, configuration: Configuration = Configuration(),
                            logger: Logger = Logger(label: "spool"), metricsFactory: (any MetricsFactory)? = nil) throws -> EventLog {
        let directory = try LogGroup.directory(group: group, writer: writer)
        try configuration.validate()
        try DirectoryIO.create(group, permissions: configuration.directoryMode)
        try DirectoryIO.create(LogGroup.writersDirectory(of: group), permissions: configuration.directoryMode, insideLog: true)
        return try open(directory: directory, configuration: configuration, logger: logger, metricsFactory: metricsFactory)
    }
}
