// swift-tools-version: 6.2
import PackageDescription

// Spool's benchmarks: their own package, so that library users never resolve benchmark
// dependencies (package-benchmark, SQLite).
//
//   swift run -c release --package-path Benchmarks compare [--events N] [--json FILE]
//   swift package --package-path Benchmarks benchmark          (micro benchmarks)
let package = Package(
    name: "SpoolBenchmarks",
    platforms: [.macOS(.v15), .iOS(.v18)],
    dependencies: [
        .package(name: "Spool", path: ".."),
        .package(url: "https://github.com/ordo-one/package-benchmark", from: "1.38.0", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.21.0"),
    ],
    targets: [
        // The Spool half of the scenarios, shared with `spool bench`: the root package's
        // Sources/SpoolBench, compiled here through the symbolic link Sources/BenchScenarios.
        // SpoolBench is not a product of Spool (no user's package graph should list benchmark
        // and test support), and SwiftPM lets a package depend only on another's products; the
        // link keeps one copy of the code. (A target name must be unique across the package
        // graph, hence not `SpoolBench`.)
        // The servers the scenarios start (the root package's Sources/SpoolServers, through the
        // link Sources/BenchServers, for the same reason). SpoolBench's files import it as
        // `SpoolServers` there and `BenchServers` here (`#if canImport(SpoolServers)`).
        .target(
            name: "BenchServers",
            dependencies: [
                .product(name: "Spool", package: "Spool"),
                .product(name: "SpoolSync", package: "Spool"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ]
        ),
        .target(
            name: "BenchScenarios",
            dependencies: [
                "BenchServers",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Spool", package: "Spool"),
                .product(name: "SpoolSync", package: "Spool"),
                .product(name: "SpoolCollector", package: "Spool"),
                .product(name: "SpoolPubSub", package: "Spool"),
                .product(name: "SpoolPostgres", package: "Spool"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ]
        ),
        // SQLite, for the baseline only: never a dependency of the library.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]),
        // The Sensors Analytics SDK's store, as the other side of every comparison.
        .target(name: "SQLiteBaseline", dependencies: ["CSQLite", "BenchScenarios"]),
        // Spool vs SQLite vs the hardware, as ratios.
        .executableTarget(
            name: "compare",
            dependencies: [
                "SQLiteBaseline", "BenchScenarios",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Micro benchmarks (package-benchmark): `swift package benchmark`.
        .executableTarget(
            name: "SpoolMicro",
            dependencies: [
                .product(name: "Benchmark", package: "package-benchmark"),
                .product(name: "Spool", package: "Spool"),
                .product(name: "SpoolSync", package: "Spool"),
                "BenchScenarios",
            ],
            path: "Benchmarks/SpoolMicro",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
        ),
    ]
)

for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + [
        .enableUpcomingFeature("ExistentialAny"),
    ]
}
