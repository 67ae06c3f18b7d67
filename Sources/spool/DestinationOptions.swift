import ArgumentParser
import Foundation
import Spool
import SpoolPostgres
import SpoolPubSub
import SpoolSync

/// Where `spool sync` delivers: an HTTP collector (`--url`), a Google Cloud Pub/Sub topic
/// (`--pubsub-topic`) or a PostgreSQL table (`--postgres`). Exactly one is given.
struct DestinationOptions: ParsableArguments {
    @Option(help: "The collector's URL (http or https); credentials in it are sent as Basic auth and never printed.")
    var url: String?

    @Option(name: .customLong("pubsub-topic"), help: """
        Publish to this Google Cloud Pub/Sub topic, projects/P/topics/T: one message per record. \
        Credentials: the service-account key GOOGLE_APPLICATION_CREDENTIALS names, or none with \
        PUBSUB_EMULATOR_HOST=host:port (then published there).
        """)
    var pubsubTopic: String?

    @Option(name: .customLong("pubsub-endpoint"), help: "The Pub/Sub API's root URL (default: the emulator's when PUBSUB_EMULATOR_HOST is set, else https://pubsub.googleapis.com).")
    var pubsubEndpoint: String?

    @Option(name: .customLong("ordering-key"), help: """
        Pub/Sub ordering key: 'log' (each log's records in seq order to a subscription with \
        message ordering; one publish in flight) or 'none' (default).
        """)
    var orderingKey: PubSubSink.OrderingKey = .none

    @Option(help: """
        Insert into PostgreSQL, postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?sslmode=MODE]: each \
        request one transaction, each record once (ON CONFLICT (id) DO NOTHING). The password \
        may come from PGPASSWORD instead; it is never printed.
        """)
    var postgres: String?

    @Option(help: "The PostgreSQL table (NAME or SCHEMA.NAME): id text primary key, log_id, seq, time, data jsonb, data_bytes bytea.")
    var table: String?

    @Flag(name: .customLong("create-table"), help: "Create the --table when it is missing (without it, a missing table stops the sync).")
    var createTable = false

    func validate() throws {
        let given = [url != nil, pubsubTopic != nil, postgres != nil].filter { $0 }.count
        guard given == 1 else {
            throw ValidationError(given == 0 ? "give a destination: --url, --pubsub-topic or --postgres"
                                             : "give one destination: --url, --pubsub-topic or --postgres, not several")
        }
        if postgres == nil, table != nil || createTable {
            throw ValidationError("--table and --create-table go with --postgres")
        }
        if postgres != nil {
            guard table != nil else { throw ValidationError("--postgres needs --table NAME") }
            do {
                _ = try postgresConfiguration()
            } catch {
                throw ValidationError(error.message)
            }
        }
        if let url {
            guard let parsed = endpoint?.url, let scheme = parsed.scheme?.lowercased(), ["http", "https"].contains(scheme), parsed.host != nil else {
                throw ValidationError("--url must be an http or https URL, not '\(Self.redacted(url))'")
            }
        }
        if let pubsubTopic {
            do {
                try PubSubSink.validate(topic: pubsubTopic)
            } catch {
                throw ValidationError(error.message)
            }
        }
        if pubsubTopic == nil, pubsubEndpoint != nil || orderingKey != .none {
            throw ValidationError("--pubsub-endpoint and --ordering-key go with --pubsub-topic")
        }
        if let pubsubEndpoint {
            guard let parsed = URL(string: pubsubEndpoint), let scheme = parsed.scheme?.lowercased(), ["http", "https"].contains(scheme), parsed.host != nil else {
                throw ValidationError("--pubsub-endpoint must be an http or https URL, not '\(Self.redacted(pubsubEndpoint))'")
            }
        }
    }

    /// Headers the destination itself asks for: a `--url`'s credentials as Basic auth.
    var authorization: String? { endpoint?.authorization }

    /// The sink for the records of log `logID` (`origins`: a collector's log of device records).
    func sink(logID: LogID, origins: Bool, configuration: SyncConfiguration) throws -> any SyncSink {
        if postgres != nil {
            return try PostgresSink(configuration: try postgresConfiguration(), logID: logID, origins: origins,
                                    logger: commandLogger("spool.postgres"))
        }
        if let topic = pubsubTopic {
            return try PubSubSink(topic: topic, endpoint: pubsubEndpoint.flatMap(URL.init(string:)), orderingKey: orderingKey,
                                  logID: logID, origins: origins)
        }
        return HTTPSink(uploader: platformUploader(url: endpoint!.url), logID: logID, configuration: configuration)
    }

    /// Where records go, for people: never credentials or a query string (it may hold a token).
    /// (Not `description`: string interpolation of the options would print their fields, the
    /// query's token among them.)
    var printable: String {
        if let pubsubTopic { return "Pub/Sub topic \(pubsubTopic)" }
        if let configuration = try? postgresConfiguration() { return "PostgreSQL \(configuration)" }
        guard let url = endpoint?.url, var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return "the collector" }
        components.query = nil
        components.fragment = nil
        return components.string ?? "the collector"
    }

    /// `--postgres`, `--table` and `--create-table`, with the password from PGPASSWORD when
    /// the URL has none.
    func postgresConfiguration() throws(SyncError) -> PostgresSink.Configuration {
        guard let postgres else { throw SyncError(.invalidConfiguration, "no --postgres") }
        var configuration = try PostgresSink.Configuration(
            url: postgres, table: table ?? "", password: ProcessInfo.processInfo.environment["PGPASSWORD"])
        configuration.createTable = createTable
        return configuration
    }

    /// `--url` without its `user:password@` part, and those credentials as a Basic
    /// `Authorization` header (RFC 7617): a URL's credentials are sent, and the URL that is
    /// printed or logged never holds the password. Nil when `--url` is not given or does not parse.
    var endpoint: (url: URL, authorization: String?)? {
        guard let url, var components = URLComponents(string: url) else { return nil }
        var authorization: String?
        if components.user != nil || components.password != nil {
            let credentials = (components.user ?? "") + ":" + (components.password ?? "")
            authorization = "Basic " + Data(credentials.utf8).base64EncodedString()
            components.user = nil
            components.password = nil
        }
        return components.url.map { ($0, authorization) }
    }

    /// `text` with anything between `//` and an `@` (credentials) replaced by `***`, and
    /// without a query or fragment (a token travels there), for messages.
    static func redacted(_ text: String) -> String {
        let text = String(text.prefix { $0 != "?" && $0 != "#" })
        guard let start = text.range(of: "//"), let at = text[start.upperBound...].firstIndex(of: "@") else { return text }
        return text[..<start.upperBound] + "***" + text[at...]
    }
}

extension PubSubSink.OrderingKey: ExpressibleByArgument {}
