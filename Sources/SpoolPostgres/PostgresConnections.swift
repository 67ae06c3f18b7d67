import Logging
import PostgresNIO
import Synchronization

/// The sink's connections: one per request in flight, kept open between requests, opened
/// again after one was dropped.
///
/// A connection that failed in any way is closed, never reused: its transaction state is
/// unknown. One idle connection the server closed meanwhile (a restart) is noticed before use
/// and dropped. Thread safety: every member may be called from any task.
final class PostgresConnections: Sendable {
    private struct State {
        var idle: [PostgresConnection] = []
        var nextID = 1
        var isShutDown = false
    }

    private let state = Mutex(State())
    private let configuration: PostgresConnection.Configuration
    /// postgres-nio's logger: silent, so that no statement or bound value reaches a log.
    private let logger = Logger(label: "spool.postgres.connection", factory: { _ in SwiftLogNoOpLogHandler() })

    init(configuration: PostgresConnection.Configuration) {
        self.configuration = configuration
    }

    /// An open connection: an idle one, or a new one.
    ///
    /// - Throws: what connecting threw (refused, authentication, timeout), or
    ///   `CancellationError` once ``shutdown()`` was called.
    func take() async throws -> PostgresConnection {
        while true {
            let (connection, id): (PostgresConnection?, Int) = try state.withLock { state in
                if state.isShutDown { throw CancellationError() }
                if let connection = state.idle.popLast() { return (connection, 0) }
                state.nextID += 1
                return (nil, state.nextID)
            }
            guard let connection else {
                return try await PostgresConnection.connect(configuration: configuration, id: id, logger: logger)
            }
            if !connection.isClosed { return connection }
        }
    }

    /// Hands back a connection whose last transaction ended with COMMIT.
    func giveBack(_ connection: PostgresConnection) {
        let keep = state.withLock { state in
            guard !state.isShutDown else { return false }
            state.idle.append(connection)
            return true
        }
        if !keep { Self.close(connection) }
    }

    /// Closes a connection whose state is unknown (an error, a timeout, a cancellation).
    func discard(_ connection: PostgresConnection) {
        Self.close(connection)
    }

    /// Starts closing `connection`, which stays alive until it is closed (postgres-nio asserts
    /// that a connection is closed before it is released).
    static func close(_ connection: PostgresConnection) {
        connection.close().whenComplete { _ in withExtendedLifetime(connection) {} }
    }

    /// Closes the idle connections; later ``take()``s throw.
    func shutdown() async {
        let idle = state.withLock { state in
            state.isShutDown = true
            defer { state.idle = [] }
            return state.idle
        }
        for connection in idle { try? await connection.close() }
    }
}
