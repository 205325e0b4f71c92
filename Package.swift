// swift-tools-version:6.2
import PackageDescription

/// Every Swift target is built in Swift 6 language mode with warnings treated as errors.
let strict: [SwiftSetting] = [.treatAllWarnings(as: .error)]

let package = Package(
    name: "herald",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "herald", targets: ["herald"]),
        .executable(name: "herald-bench", targets: ["herald-bench"]),
    ],
    targets: [
        // C libraries from Debian, reached only through these thin system-library targets.
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),

        // A lock that stays in user space under contention (glibc's pthread mutex).
        .target(name: "Locking", swiftSettings: strict),

        // JSON values and the one strict parser every route reads bodies with (no C, no unsafe code).
        .target(name: "JSON", swiftSettings: strict),

        // One Swift module per wrapped library; all unsafe code lives in these.
        .target(name: "Postgres", dependencies: ["CLibPQ", "Locking"], swiftSettings: strict),
        // Hooks where libmicrohttpd has no option: its own error answers in SPEC §3's JSON, chunk sizes over the body limit.
        .target(name: "CMicroHTTPDHooks", dependencies: ["CMicroHTTPD"], linkerSettings: [.linkedLibrary("dl")]),
        // The HTTP vocabulary, no I/O: methods, and errors with their status and SPEC §3 code.
        .target(name: "HTTPTypes", dependencies: ["JSON"], swiftSettings: strict),
        .target(name: "HTTPServer", dependencies: ["CMicroHTTPD", "CMicroHTTPDHooks", "HTTPTypes", "JSON", "Locking"], swiftSettings: strict),
        .target(name: "Secrets", dependencies: ["CCrypto"], swiftSettings: strict),
        // Outbound HTTP (built-in delivery): libcurl's multi interface.
        .target(name: "HTTPClient", dependencies: ["CCurl", "Locking"], swiftSettings: strict),

        // Herald in four layers, each depending only on those below it (docs/architecture.md):
        // the domain — events, routing, preferences, settings, job payloads: rules and values,
        // no SQL, no server, no outbound I/O, unit-tested without a database;
        .target(name: "HeraldDomain", dependencies: ["JSON", "HTTPTypes", "Secrets", "Locking"], swiftSettings: strict),
        // the store — every SQL statement: facts, derived state, jobs, migrations, record types;
        .target(name: "HeraldStore", dependencies: ["HeraldDomain", "HTTPTypes", "Postgres", "JSON", "Secrets", "Locking"], swiftSettings: strict),
        // the API — the HTTP handlers, each with the services it uses, and the long-poll waiters;
        .target(name: "HeraldAPI", dependencies: ["HeraldStore", "HeraldDomain", "HTTPServer", "HTTPClient", "Postgres", "JSON", "Secrets", "Locking"],
                swiftSettings: strict),
        // the app — a running instance: its services (delivery, listener, workers) under one
        // group, start-up and shutdown, the command line.
        .target(name: "HeraldApp", dependencies: ["HeraldAPI", "HeraldStore", "HeraldDomain", "HTTPServer", "HTTPClient", "Postgres",
                                                  "JSON", "Secrets", "Locking"], swiftSettings: strict),

        // The small executable: configuration, migrations, serve, CLI.
        .executableTarget(name: "herald", dependencies: ["HeraldApp"], swiftSettings: strict),

        // `make bench`: data, load from a second process, and the machine's own ceilings.
        .executableTarget(name: "herald-bench", dependencies: ["Postgres", "HeraldApp", "HeraldAPI", "HeraldStore", "HeraldDomain",
                                                           "HTTPServer", "Locking", "Secrets"], swiftSettings: strict),

        // Pure tests: no database, no server (`swift test --filter HeraldUnitTests` runs anywhere).
        .testTarget(
            name: "HeraldUnitTests",
            dependencies: ["HeraldApp", "HeraldAPI", "HeraldStore", "HeraldDomain", "HeraldTestSupport", "HTTPServer", "CMicroHTTPDHooks", "HTTPClient", "JSON", "Postgres", "Secrets"],
            swiftSettings: strict
        ),
        // What the tests that need PostgreSQL share: the environment (a server on an ephemeral port,
        // apps and keys), a raw-socket HTTP client, event builders, child processes and clusters.
        .target(
            name: "HeraldTestSupport",
            dependencies: ["HeraldApp", "HeraldAPI", "HeraldStore", "HeraldDomain", "HTTPServer", "JSON", "Postgres", "Secrets"],
            path: "Tests/HeraldTestSupport",
            swiftSettings: strict
        ),
        // The API over HTTP against a real PostgreSQL and the real server (scripts/test.sh starts
        // the cluster); each suite skips itself, saying why, when DATABASE_URL is not set.
        .testTarget(
            name: "HeraldIntegrationTests",
            dependencies: ["HeraldTestSupport", "HeraldApp", "HeraldAPI", "HeraldStore", "HeraldDomain", "HTTPClient", "HTTPServer", "JSON", "Postgres", "Secrets"],
            swiftSettings: strict
        ),
        // Whole-system behaviour: crashes, restarts, shutdown, migrations, large fan-outs — child
        // `herald serve` processes and private PostgreSQL clusters.
        .testTarget(
            name: "HeraldSystemTests",
            dependencies: ["HeraldTestSupport", "HeraldApp", "HeraldAPI", "HeraldStore", "HeraldDomain", "HTTPServer", "JSON", "Postgres", "Secrets"],
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
