import SpoolSync
#if canImport(SpoolServers)
import SpoolServers
#else
import BenchServers
#endif

extension Context {
    /// Issue #25's PostgreSQL rows: events/s inserted by the sync worker through
    /// `PostgresSink` (1,000 rows a transaction; 1 and adaptive ≤ 16 in flight), against
    /// `COPY` of the same rows into the same kind of table by `psql` (the database's ceiling).
    /// Needs a server (``BenchOptions/postgres``) where the run may create and drop tables.
    /// Goal: adaptive ≥ 50% of COPY.
    func postgresRows() async throws -> [Row] {
        guard let url = options.postgres else {
            throw BenchError("the postgres group needs --postgres postgres://USER@HOST:PORT/DB, a server where it may create tables")
        }
        let spool = self.spool
        let count = min(options.drainEvents, 100_000)
        let steps = [
            Step(key: "spool 1") { try await spool.drainToPostgres(url: url, count: count, directory: $0, concurrency: .fixed(1)) },
            Step(key: "spool adaptive") {
                try await spool.drainToPostgres(url: url, count: count, directory: $0, concurrency: .adaptive(max: 16))
            },
        ]
        let copy = [Step(key: "copy") { try await spool.copyIntoPostgres(url: url, count: count, directory: $0) }]
        progress("postgres: \(count) events into a new table per measurement")
        let best = try await alternate(steps, copy)
        func figure(_ key: String) -> Figure { .events(best[key]!) }
        return [
            Row(group: "postgres", scenario: "worker → PostgreSQL, 1,000 rows per transaction, 1 in flight", spool: figure("spool 1"),
                baseline: "COPY of the same rows by psql", baselineFigure: figure("copy"), percent: true),
            Row(group: "postgres", scenario: "worker → PostgreSQL, 1,000 rows per transaction, adaptive ≤ 16",
                spool: figure("spool adaptive"), baseline: "COPY of the same rows by psql", baselineFigure: figure("copy"),
                percent: true, goal: .atLeast(0.5)),
        ]
    }

    /// Issue #34's PostgreSQL row: a server that refuses connections past its
    /// `max_connections` (SQLSTATE 53300, which `PostgresSink` marks overloaded). A cluster of
    /// the run's own with `max_connections` = ``limitedConnections``, drained with 2, 4 and 8
    /// in flight and adaptive ≤ 32; goal: adaptive ≥ 80% of the best fixed concurrency, without
    /// a failed drain.
    func postgresLimitRows() async throws -> [Row] {
        let cluster = try PostgresCluster.own(maxConnections: Self.limitedConnections)
        let url = cluster.url(database: try cluster.createDatabase())
        let spool = self.spool
        let count = min(options.drainEvents, 100_000)
        let fixed = [2, 4, 8]
        let steps = fixed.map { width in
            Step(key: "fixed \(width)") { try await spool.drainToPostgres(url: url, count: count, directory: $0, concurrency: .fixed(width)) }
        } + [Step(key: "adaptive") { try await spool.drainToPostgres(url: url, count: count, directory: $0, concurrency: .adaptive(max: 32)) }]
        progress("postgres-limit: \(count) events into a new table per measurement, max_connections \(Self.limitedConnections)")
        let best = try await alternate(steps, [])
        let (bestKey, bestRun) = fixed.map { ("fixed \($0)", best["fixed \($0)"]!) }.max { $0.1.rate < $1.1.rate }!
        return fixed.map { width in
            Row(group: "postgres", scenario: "worker → PostgreSQL at max_connections \(Self.limitedConnections), \(width) in flight",
                spool: .events(best["fixed \(width)"]!))
        } + [
            Row(group: "postgres", scenario: "worker → PostgreSQL at max_connections \(Self.limitedConnections), adaptive ≤ 32",
                spool: .events(best["adaptive"]!), baseline: "the best fixed concurrency (\(bestKey))",
                baselineFigure: .events(bestRun), percent: true, goal: .atLeast(0.8)),
        ]
    }

    /// The `max_connections` of ``postgresLimitRows()``'s cluster.
    static let limitedConnections = 8
}
