import SpoolSync
#if canImport(SpoolServers)
import SpoolServers
#else
import BenchServers
#endif

extension Context {
    /// Issue #28's fleet rows (only with `--only fleet`: it starts nginx, and a PostgreSQL
    /// cluster of its own unless ``BenchOptions/postgres`` names a server): events/s from 4
    /// device logs through nginx to 1, 2 and 3 durable collectors, each forwarded into one
    /// PostgreSQL table, until the table holds them all. 1 collector is compared with the same
    /// events drained straight from one log into PostgreSQL (the worker alone, adaptive ≤ 16),
    /// 2 and 3 with 1 collector (how the fleet scales on this machine).
    func fleetRows() async throws -> [Row] {
        let spool = self.spool
        let url = try options.postgres ?? {
            let cluster = try PostgresCluster.shared()
            return cluster.url(database: try cluster.createDatabase())
        }()
        let count = min(options.drainEvents, 40_000)
        let steps = (1...3).map { collectors in
            Step(key: "fleet \(collectors)") { try await spool.fleetIntoPostgres(collectors: collectors, url: url, count: count, directory: $0) }
        }
        let direct = [Step(key: "direct") {
            try await spool.drainToPostgres(url: url, count: count, directory: $0, concurrency: .adaptive(max: 16))
        }, Step(key: "copy") { try await spool.copyIntoPostgres(url: url, count: count, directory: $0) }]
        progress("fleet: \(count) events from 4 devices through nginx into PostgreSQL per measurement")
        let best = try await alternate(steps, direct)
        func figure(_ key: String) -> Figure { .events(best[key]!) }
        return [
            Row(group: "fleet", scenario: "4 devices → nginx → 1 collector --log → PostgreSQL", spool: figure("fleet 1"),
                baseline: "one log → PostgreSQL, adaptive ≤ 16", baselineFigure: figure("direct"), percent: true),
            Row(group: "fleet", scenario: "4 devices → nginx → 1 collector --log → PostgreSQL", spool: figure("fleet 1"),
                baseline: "COPY of the same rows by psql", baselineFigure: figure("copy"), percent: true),
        ] + (2...3).map { collectors in
            Row(group: "fleet", scenario: "4 devices → nginx → \(collectors) collectors --log → PostgreSQL",
                spool: figure("fleet \(collectors)"), baseline: "the same through 1 collector", baselineFigure: figure("fleet 1"))
        }
    }
}
