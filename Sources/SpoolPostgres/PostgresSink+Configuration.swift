import Foundation
import SpoolSync

extension PostgresSink {
    /// Where ``PostgresSink`` inserts: the server, the credentials, the table, and whether
    /// the sink may create it.
    ///
    /// The password is never printed: ``description`` and ``redactedURL`` leave it out.
    public struct Configuration: Sendable, CustomStringConvertible {
        /// Whether the connection is encrypted, as libpq's `sslmode`.
        public enum TLSMode: Sendable {
            /// Never: plain TCP. The default.
            case disable
            /// TLS when the server offers it, plain TCP otherwise; the certificate is not
            /// verified (libpq's `prefer`).
            case prefer
            /// TLS or no connection; the certificate is not verified (libpq's `require`).
            case require
            /// TLS with the certificate verified against the system's roots and the host name
            /// (libpq's `verify-full`).
            case verifyFull

            /// Reads libpq's spelling: `disable`, `prefer`, `require`, `verify-full`.
            public init?(sslmode: String) {
                guard let mode = [Self.disable, .prefer, .require, .verifyFull].first(where: { $0.sslmode == sslmode }) else { return nil }
                self = mode
            }

            /// libpq's spelling of the mode.
            public var sslmode: String {
                switch self {
                case .disable: "disable"
                case .prefer: "prefer"
                case .require: "require"
                case .verifyFull: "verify-full"
                }
            }
        }

        /// The server's host name or address.
        public var host: String
        /// The server's port. The default is 5432.
        public var port: Int = 5432
        /// The role to connect as.
        public var username: String
        /// The role's password, if the server asks for one. Never printed.
        public var password: String?
        /// The database.
        public var database: String
        /// The table, optionally schema-qualified (`events`, `analytics.events`): letters,
        /// digits, `_` and `$`, not starting with a digit, at most 63 bytes a part. It is
        /// quoted in every statement, so its case is kept.
        public var table: String
        /// Whether the sink creates the table when it is missing. The default is `false`: a
        /// missing table stops the worker with an error naming it.
        public var createTable: Bool = false
        /// The encryption of the connection. The default is ``TLSMode/disable``.
        public var tls: TLSMode = .disable
        /// How long a connection may take to open before the request is retried. The default
        /// is 10 s.
        public var connectTimeout: Duration = .seconds(10)

        /// A configuration of every part.
        public init(host: String, port: Int = 5432, username: String, password: String?, database: String, table: String) {
            self.host = host
            self.port = port
            self.username = username
            self.password = password
            self.database = database
            self.table = table
        }

        /// Reads `postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?sslmode=MODE]` (or `postgresql://`).
        ///
        /// - Parameters:
        ///   - url: the server's URL; user, password and database are percent-decoded.
        ///   - table: the table (see ``table``).
        ///   - password: the password when the URL carries none (`PGPASSWORD`, say).
        /// - Throws: `SyncError.Code.invalidConfiguration` naming what is wrong, with the URL
        ///   printed without its password.
        public init(url: String, table: String, password: String? = nil) throws(SyncError) {
            let redacted = Self.redact(url)
            func invalid(_ what: String) -> SyncError {
                SyncError(.invalidConfiguration, "the PostgreSQL URL '\(redacted)' \(what)")
            }
            guard let components = URLComponents(string: url),
                  let scheme = components.scheme?.lowercased(), ["postgres", "postgresql"].contains(scheme)
            else { throw invalid("is not postgres://USER[:PASSWORD]@HOST:PORT/DB") }
            guard let host = components.host, !host.isEmpty else { throw invalid("has no host") }
            guard let user = components.user, !user.isEmpty else { throw invalid("has no user") }
            let database = String(components.path.drop(while: { $0 == "/" })).removingPercentEncoding ?? ""
            guard !database.isEmpty, !database.contains("/") else { throw invalid("has no database (…/DB)") }
            self.init(host: host, port: components.port ?? 5432, username: user,
                      password: components.password ?? password, database: database, table: table)
            for item in components.queryItems ?? [] {
                switch item.name {
                case "sslmode":
                    guard let mode = TLSMode(sslmode: item.value ?? "") else {
                        throw invalid("has sslmode '\(item.value ?? "")': disable, prefer, require or verify-full")
                    }
                    tls = mode
                default:
                    throw invalid("has the parameter '\(item.name)', which Spool does not know (only sslmode)")
                }
            }
            try validate()
        }

        /// The server's URL without the password: `postgres://USER@HOST:PORT/DB`.
        public var redactedURL: String {
            var components = URLComponents()
            components.scheme = "postgres"
            components.user = username
            components.host = host
            components.port = port
            components.path = "/" + database
            if tls != .disable { components.queryItems = [URLQueryItem(name: "sslmode", value: tls.sslmode)] }
            return components.string ?? "postgres://\(host):\(port)/\(database)"
        }

        /// The URL without its password, and the table.
        public var description: String { "\(redactedURL) table \(table)" }

        /// Checks the table's name and the port.
        ///
        /// - Throws: `SyncError.Code.invalidConfiguration` naming the field.
        public func validate() throws(SyncError) {
            guard (1...65_535).contains(port) else {
                throw SyncError(.invalidConfiguration, "the PostgreSQL port must be 1...65535, not \(port)")
            }
            guard TableName(table) != nil else {
                throw SyncError(.invalidConfiguration, """
                    the table name '\(table)' is not NAME or SCHEMA.NAME (letters, digits, _ and $, \
                    not starting with a digit, at most 63 bytes each)
                    """)
            }
            guard connectTimeout > .zero else {
                throw SyncError(.invalidConfiguration, "the PostgreSQL connect timeout must be positive")
            }
        }

        /// `url` with any password replaced by nothing: what may be printed of a URL a user gave.
        static func redact(_ url: String) -> String {
            guard var components = URLComponents(string: url), components.password != nil else {
                // Unparsable: drop everything between "://" and the last "@", which may hold one.
                guard let scheme = url.range(of: "://"), let at = url.range(of: "@", options: .backwards),
                      scheme.upperBound <= at.lowerBound else { return url }
                return String(url[..<scheme.upperBound]) + "…" + String(url[at.lowerBound...])
            }
            components.password = nil
            return components.string ?? "postgres://…"
        }
    }
}

/// A table name Spool accepts, and its quoted form for statements.
struct TableName: Sendable, Equatable {
    /// The schema, when the name is qualified.
    var schema: String?
    /// The table itself.
    var name: String

    init?(_ text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard (1...2).contains(parts.count), parts.allSatisfy(Self.isIdentifier) else { return nil }
        schema = parts.count == 2 ? parts[0] : nil
        name = parts[parts.count - 1]
    }

    /// `"schema"."name"` or `"name"`: safe to put in a statement (no quote can be inside).
    var quoted: String {
        [schema, name].compactMap { $0 }.map { "\"\($0)\"" }.joined(separator: ".")
    }

    private static func isIdentifier(_ part: String) -> Bool {
        guard let first = part.unicodeScalars.first, !("0"..."9").contains(first), part.utf8.count <= 63 else { return false }
        return part.unicodeScalars.allSatisfy { scalar in
            ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar)
                || scalar == "_" || scalar == "$"
        }
    }
}
