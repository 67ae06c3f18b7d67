import PostgresNIO
import SpoolSync

/// What PostgreSQL's answers mean for a request: an error becomes one of the outcomes the
/// worker knows. Pure, so every mapping is tested without a server.
///
/// | answer | outcome |
/// |---|---|
/// | no connection, reset, closed; SQLSTATE classes 08 (connection), 57 (shutting down, cancelled), 40 (serialization, deadlock), 55, 58, XX and any other | retry |
/// | 22 (data exception: a value PostgreSQL refuses, which only its record causes) | rejected: split until the record is alone; then, if it went to `data`, the sink inserts it again in `data_bytes` (``PostgresSink/send(_:timeout:)``), else it is dead-lettered |
/// | 54 (program limit: a value too large) | too large: split, then dead-lettered alone |
/// | 53 (insufficient resources: `too_many_connections` 53300, out of memory, disk full) and 57P03 (`cannot_connect_now`: starting up), as well as a cancellation or a timeout | retry, marked `SyncError/overloaded`: the adaptive concurrency halves |
/// | 28 (credentials), 3D (no such database), 3F, 42 (missing table, permission, schema), 0A, 23 (a constraint the table has beyond Spool's), 44; a password asked for and none given; no TLS where required; a TLS handshake that failed (a certificate not trusted under verify-full) | fatal: the worker stops |
enum PostgresAnswer {
    /// The outcome of a request that failed with `error`.
    ///
    /// - Parameters:
    ///   - error: what the connection or a statement threw.
    ///   - table: the table, named in a fatal error.
    ///   - destination: the server without its password, named in a fatal error.
    static func outcome(of error: any Error, table: String, destination: String) -> SinkOutcome {
        if error is CancellationError {
            return .retry(SyncError(.timeout, "the PostgreSQL request was cancelled or timed out"))
        }
        guard let error = error as? PSQLError else {
            return .retry(SyncError(.network, "the connection to PostgreSQL at \(destination) failed", cause: error))
        }
        switch error.code {
        case .server:
            return serverOutcome(error, table: table, destination: destination)
        case .authMechanismRequiresPassword:
            return .fatal(SyncError(.destinationRefused, """
                PostgreSQL at \(destination) asks for a password and none was given (give it in the \
                URL or PGPASSWORD)
                """))
        case .unsupportedAuthMechanism, .saslError:
            return .fatal(SyncError(.destinationRefused, "PostgreSQL at \(destination) refused the authentication (\(error.code))"))
        case .sslUnsupported:
            return .fatal(SyncError(.destinationRefused, "PostgreSQL at \(destination) does not offer TLS, which sslmode requires"))
        case .queryCancelled:
            return .retry(SyncError(.timeout, "the PostgreSQL statement was cancelled"))
        case .connectionError where Self.isHandshakeFailure(error.underlying):
            // A handshake that failed on the certificate (no root vouches for it, or it names
            // another host, under verify-full): waiting will not change it.
            return .fatal(SyncError(.destinationRefused, """
                the TLS handshake with PostgreSQL at \(destination) failed: its certificate is not \
                trusted for this host (sslmode verify-full checks it against the system's roots)
                """, cause: error.underlying))
        default:
            return .retry(SyncError(.network, "the connection to PostgreSQL at \(destination) failed (\(error.code))"))
        }
    }

    /// Whether `error` is a TLS handshake the client refused (a certificate it does not trust):
    /// not a connection lost mid-handshake, which is retried.
    private static func isHandshakeFailure(_ error: (any Error)?) -> Bool {
        if case .handshakeFailed = error as? NIOSSLError { return true }
        return false
    }

    /// Whether SQLSTATE `state` says the server is overloaded: class 53 (insufficient
    /// resources, `too_many_connections` among them) or 57P03 (`cannot_connect_now`).
    static func meansOverload(_ state: String) -> Bool {
        state.hasPrefix("53") || state == "57P03"
    }

    /// The outcome of an error the server sent: by its SQLSTATE's class.
    private static func serverOutcome(_ error: PSQLError, table: String, destination: String) -> SinkOutcome {
        let state = error.serverInfo?[.sqlState] ?? ""
        // The primary message names objects, never values; values go in `detail`, never read.
        let message = error.serverInfo?[.message] ?? "no message"
        let stateClass = String(state.prefix(2))
        func failure(_ code: SyncError.Code, _ text: String) -> SyncError {
            var failure = SyncError(code, text, overloaded: Self.meansOverload(state))
            failure.serverMessage = message
            return failure
        }
        switch stateClass {
        case "22":
            return .rejected(failure(.rejected, "PostgreSQL refused a value of the batch (SQLSTATE \(state))"))
        case "54":
            return .tooLarge(failure(.payloadTooLarge, "PostgreSQL refused the batch as too large (SQLSTATE \(state))"))
        case "28", "3D", "3F", "42", "0A", "23", "44":
            return .fatal(failure(.destinationRefused, "PostgreSQL at \(destination) refused table \(table): \(message) (SQLSTATE \(state))"))
        default:
            return .retry(failure(.serverError, "PostgreSQL failed the request (SQLSTATE \(state))"))
        }
    }
}
