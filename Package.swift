// swift-tools-version: 6.2
import PackageDescription

// One settings loop for every Swift target: Swift 6 language mode with strict
// concurrency, and `any` spelled out for existentials.
let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .treatAllWarnings(as: .error),
]

let package = Package(
    name: "Spool",
    // Why these versions: Spool's locks and counters are the standard library's `Mutex` and
    // `Atomic` (the Synchronization module), which need macOS 15 / iOS 18. That is the only
    // reason. Lowering to iOS 16 (the floor of `Duration` and `Clock`, used throughout) means
    // replacing them with `OSAllocatedUnfairLock` and swift-atomics; below iOS 16, replacing
    // the clocks as well.
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "Spool", targets: ["Spool"]),
        .library(name: "SpoolSync", targets: ["SpoolSync"]),
        .library(name: "SpoolCollector", targets: ["SpoolCollector"]),
        .library(name: "SpoolPostgres", targets: ["SpoolPostgres"]),
        .library(name: "SpoolPubSub", targets: ["SpoolPubSub"]),
        .executable(name: "spool", targets: ["spool"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-crypto", "3.0.0"..<"5.0.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.0.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.21.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.0.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.21.0"),
        // Latency distributions of `spool bench` (HdrHistogram).
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        // `swift package generate-documentation` for the DocC catalogs (scripts/docs); a plugin,
        // so nothing of it is linked into Spool.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.4.0"),
    ],
    targets: [
        // System libraries: zstd (compression), ISA-L (CRC-32C), zlib (gzip bodies).
        .systemLibrary(name: "CZstd", pkgConfig: "libzstd", providers: [.apt(["libzstd-dev"]), .brew(["zstd"])]),
        .systemLibrary(name: "CISAL", pkgConfig: "libisal", providers: [.apt(["libisal-dev"]), .brew(["isa-l"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),

        // The storage engine: no network, no server dependency.
        .target(
            name: "Spool",
            dependencies: [
                "CZstd", "CISAL",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The sync worker and its HTTP uploaders: AsyncHTTPClient on Linux only, so an app on
        // Apple platforms links neither SwiftNIO nor BoringSSL and posts with URLSession.
        .target(
            name: "SpoolSync",
            dependencies: [
                "Spool", "SpoolJSON", "CZstd", "CZlib",
                .product(name: "AsyncHTTPClient", package: "async-http-client", condition: .when(platforms: [.linux])),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        // The PostgreSQL sink: its own product, so that an app linking SpoolSync links no
        // postgres-nio (nor SwiftNIO's TLS stack on Apple platforms).
        .target(
            name: "SpoolPostgres",
            dependencies: [
                "Spool", "SpoolSync",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Google Cloud Pub/Sub as a destination: its REST publish through SpoolSync's uploaders,
        // and the service-account token flow (RS256 from swift-crypto's extras).
        .target(
            name: "SpoolPubSub",
            dependencies: [
                "Spool", "SpoolSync",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ]
        ),
        // Spool's one JSON grammar: what the sync worker checks records with and the reference
        // collector reads bodies with. Not a product: no user imports it.
        .target(name: "SpoolJSON"),
        // The reference collector: an HTTP server for tests, the demo and benchmarks.
        .target(
            name: "SpoolCollector",
            dependencies: [
                "Spool", "SpoolJSON", "CZstd", "CZlib",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                // SHA-256 of bearer tokens, compared in constant time (`--auth-token-file`).
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The real servers that tests and benchmark scenarios start on 127.0.0.1: PostgreSQL
        // clusters, the Pub/Sub emulator, nginx, an overloaded single-threaded HTTP server, and
        // free loopback ports. Not a product, and not linked into `spool` beyond what `spool bench`
        // starts. Public API of the other targets only, like SpoolBench (Benchmarks/ compiles
        // these files too, as `BenchServers`). Its declarations are `package`, never `public`.
        .target(
            name: "SpoolServers",
            dependencies: [
                "Spool", "SpoolSync",
                // The Pub/Sub emulator's administration, and nginx's health check.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ]
        ),
        // The Spool half of the benchmark scenarios (`spool bench`): its runs, statistics,
        // baselines and report. Not a product: no user's package graph lists it. Benchmarks/
        // compiles these same files as a target of its own (`BenchScenarios`, through a symbolic
        // link), since a package cannot depend on another package's non-product target: so
        // SpoolBench uses only the other targets' public API
        // (`swift build --package-path Benchmarks --product compare` checks it). Its declarations
        // are `package`: visible to `spool`, the tests and Benchmarks' targets, an API of no one's.
        .target(
            name: "SpoolBench",
            dependencies: [
                "Spool", "SpoolSync", "SpoolCollector", "SpoolPubSub", "SpoolPostgres", "SpoolServers", "CZstd",
                .product(name: "Logging", package: "swift-log"),
                // The plain publisher the Pub/Sub row is compared with.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                // The latency rows' distributions (p50 … p99.9, max).
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                // The options `spool bench` and Benchmarks' `compare` share (BenchRunOptions).
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "spool",
            dependencies: [
                "Spool", "SpoolSync", "SpoolCollector", "SpoolBench", "SpoolPubSub", "SpoolPostgres",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // `--metrics-port`: the metrics in Prometheus' text format, served by Hummingbird.
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        // The statistics of `spool bench` (intervals, verdicts) on fixed samples.
        .testTarget(name: "SpoolBenchTests", dependencies: ["SpoolBench"]),
        .testTarget(
            name: "SpoolTests",
            dependencies: ["Spool", "SpoolFuzzInput", "CZstd", .product(name: "MetricsTestKit", package: "swift-metrics")],
            resources: [.copy("Golden"), .copy("FuzzCorpus")]
        ),
        .testTarget(
            name: "SpoolSyncTests",
            dependencies: ["Spool", "SpoolSync", "SpoolCollector", "SpoolServers", "SpoolSimulation", "SpoolPubSub", "SpoolPostgres",
                           .product(name: "MetricsTestKit", package: "swift-metrics")]
        ),
        // Against the Pub/Sub emulator (started by the tests) and servers on 127.0.0.1; runs the
        // `spool` binary too.
        .testTarget(name: "SpoolPubSubTests", dependencies: [
            "Spool", "SpoolSync", "SpoolPubSub", "SpoolServers", "spool",
            .product(name: "_CryptoExtras", package: "swift-crypto"),
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
        ]),
        .testTarget(name: "SpoolCollectorTests", dependencies: [
            "Spool", "SpoolCollector", "SpoolJSON", "CZstd", "CZlib", .product(name: "AsyncHTTPClient", package: "async-http-client"),
        ]),
        // The PostgreSQL sink against a real PostgreSQL 15 cluster of the test process's own
        // (initdb, pg_ctl on 127.0.0.1), and `spool sync --postgres` as a child process.
        .testTarget(name: "SpoolPostgresTests", dependencies: [
            "Spool", "SpoolSync", "SpoolPostgres", "SpoolServers", "spool",
            .product(name: "PostgresNIO", package: "postgres-nio"),
        ]),
        // The deterministic simulator of the sync state machine: a seeded driver, a model of the
        // log and the destination, invariants checked after every step. Not a product: the
        // tests run thousands of seeds, `swift run -c release spool-simulate` runs millions.
        .target(name: "SpoolSimulation", dependencies: ["Spool", "SpoolSync"]),
        .executableTarget(name: "spool-simulate", dependencies: [
            "SpoolSimulation", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        // A fuzz target for the segment and offset-file readers; without libFuzzer it replays
        // inputs given as arguments (README, "Crash testing").
        .executableTarget(name: "SpoolFuzz", dependencies: ["SpoolFuzzInput"]),
        // What a fuzz input becomes and how it is read: shared by SpoolFuzz and FuzzCorpusTests.
        .target(name: "SpoolFuzzInput", dependencies: ["Spool", "CISAL"]),
        // The README's embedding example as a whole program (`swift run GettingStarted`).
        .executableTarget(name: "GettingStarted", dependencies: ["Spool", "SpoolSync"], path: "Examples/GettingStarted"),
        // Tests that run the `spool` binary (and GettingStarted) as real child processes (crash tests, CLI).
        .testTarget(name: "SpoolCLITests", dependencies: ["Spool", "spool", "GettingStarted", "SpoolServers"]),
    ]
)

for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + strict
}
