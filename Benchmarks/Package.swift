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
    ],
    targets: [
        // SQLite, for the baseline only: never a dependency of the library.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]),
        // The Sensors Analytics SDK's store, as the other side of every comparison.
        .target(name: "SQLiteBaseline", dependencies: ["CSQLite", .product(name: "SpoolBench", package: "Spool")]),
        // Spool vs SQLite vs the hardware, as ratios.
        .executableTarget(
            name: "compare",
            dependencies: [
                "SQLiteBaseline",
                .product(name: "SpoolBench", package: "Spool"),
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
                .product(name: "SpoolBench", package: "Spool"),
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
