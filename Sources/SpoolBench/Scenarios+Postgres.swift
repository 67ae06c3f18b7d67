import SpoolSync

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
}
