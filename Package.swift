// swift-tools-version:6.1
import PackageDescription

let nio: [Target.Dependency] = [
    .product(name: "NIOCore", package: "swift-nio"),
    .product(name: "NIOPosix", package: "swift-nio"),
]
let logging: Target.Dependency = .product(name: "Logging", package: "swift-log")

let package = Package(
    name: "blueskyd",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "blueskyd", targets: ["blueskyd"]),
        .executable(name: "bskyctl", targets: ["bskyctl"]),
        .executable(name: "atproto-testbed", targets: ["atproto-testbed"]),
        .executable(name: "blueskyd-bench", targets: ["blueskyd-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        // Tests only: generated spellings of every call through the policy and the forwarder.
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        .package(url: "https://github.com/LebJe/TOMLKit.git", from: "0.6.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
    ],
    targets: [
        // atproto syntax: handles, DIDs, NSIDs (no dependencies).
        .target(name: "ATSyntax"),
        // atproto's permission syntax: OAuth scopes and blueskyd's client policies.
        .target(name: "ATPermissions", dependencies: ["WebBasics"]),
        // What every layer spells alike, with no dependencies: base64url, URL origins.
        .target(name: "WebBasics"),
        // Outbound HTTPS: one client, trust anchors, the plain-http policy.
        .target(name: "BlueskyHTTP", dependencies: [
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            "WebBasics",
        ] + nio),
        // Handle and DID resolution (DNS TXT, well-known, PLC, did:web).
        .target(name: "ATIdentity", dependencies: ["ATSyntax", "BlueskyHTTP", logging] + nio),
        // XRPC over HTTP: method kinds from the Lexicons, legacy (app-password) sessions.
        .target(name: "XRPC", dependencies: ["BlueskyHTTP", "WebBasics"],
                resources: [.copy("Resources/LICENSE-lexicons.txt")]),
        // The account registry's port (async, one deadline per database operation), its models
        // and the rules every backend shares, the host's key and state directory, and the
        // in-memory backend of the tests.
        .target(name: "AccountStoreCore", dependencies: [
            "WebBasics", logging, .product(name: "Crypto", package: "swift-crypto"),
        ]),
        // The account registry in SQLite, on GRDB's async API.
        .target(name: "SQLiteStore", dependencies: [
            "AccountStoreCore", logging,
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Crypto", package: "swift-crypto"),
        ]),
        // The same registry in a PostgreSQL database that several hosts share: leases for
        // refreshes, LISTEN/NOTIFY for changes, one tenant per Unix user or configured name.
        .target(name: "PostgresStore", dependencies: [
            "AccountStoreCore", "WebBasics", logging,
            .product(name: "PostgresNIO", package: "postgres-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "Crypto", package: "swift-crypto"),
        ] + nio),
        // The version string both executables and `daemon.info` report (no dependencies).
        .target(name: "BlueskydVersion"),
        // JSON-RPC 2.0 messages and newline framing (Foundation only: bskyctl links it).
        .target(name: "JSONRPC"),
        // The Unix-socket JSON-RPC server: peer credentials, framing, ordered replies.
        .target(name: "RPCServer", dependencies: ["JSONRPC", logging] + nio),
        // Plain XRPC over HTTP/1.1 on a Unix socket: admission (the daemon's user, no web
        // pages), keep-alive, one handler per request.
        .target(name: "XRPCGateway", dependencies: [
            "JSONRPC", "RPCServer", "BlueskyHTTP", logging, .product(name: "NIOHTTP1", package: "swift-nio"),
        ] + nio),
        // libsystemd (sd_notify, sd_listen_fds, sd_journal_sendv), and blueskyd's Swift face of it.
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        .target(name: "SystemdGlue", dependencies: ["CSystemd", logging]),
        // Accounts, token upkeep, the scheduler, the proxy and the RPC methods.
        .target(name: "BlueskyDaemon", dependencies: [
            "ATSyntax", "ATPermissions", "ATIdentity", "BlueskyHTTP", "XRPC", "AccountStoreCore", "SQLiteStore", "PostgresStore", "JSONRPC", "RPCServer", "SystemdGlue",
            "XRPCGateway", "ATOAuth", "OAuth2Client", "DPoP", "WebBasics", "BlueskydVersion", .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            .product(name: "TOMLKit", package: "TOMLKit"),
            .product(name: "HeapModule", package: "swift-collections"),
            .product(name: "DequeModule", package: "swift-collections"),
            .product(name: "Metrics", package: "swift-metrics"),
            .product(name: "Prometheus", package: "swift-prometheus"),
            logging,
        ] + nio),
        // bskyctl's commands: a thin JSON-RPC client over the socket.
        .target(name: "BskyCtlKit", dependencies: [
            "JSONRPC", "BlueskydVersion",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        .executableTarget(name: "blueskyd", dependencies: [
            "BlueskyDaemon", "BlueskydVersion",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ], linkerSettings: [
            // An idle daemon's memory is mostly the pages of its own binary that start-up
            // touches: pack the relative relocations (DT_RELR, glibc 2.36+) instead of 3 MB of
            // RELA entries, and export no symbols, which nothing loads against.
            .unsafeFlags(["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs", "-Xlinker", "--no-export-dynamic"],
                         .when(platforms: [.linux], configuration: .release)),
        ]),
        .executableTarget(name: "bskyctl", dependencies: ["BskyCtlKit"], linkerSettings: [
            // As blueskyd's: a thin client's binary stays small (docs/PERFORMANCE.md, "Footprint").
            .unsafeFlags(["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs", "-Xlinker", "--no-export-dynamic"],
                         .when(platforms: [.linux], configuration: .release)),
        ]),

        // A local AT Protocol network for tests and benchmarks: PLC, handles, PDS, over TLS.
        .target(name: "ATTestbed", dependencies: [
            "JSONRPC", "DPoP", "WebBasics",
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "X509", package: "swift-certificates"),
            .product(name: "SwiftASN1", package: "swift-asn1"),
            .product(name: "Crypto", package: "swift-crypto"),
        ] + nio),
        .executableTarget(name: "atproto-testbed", dependencies: [
            "ATTestbed",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        // Real blueskyd processes against a testbed, for the end-to-end tests and the bench: a
        // PostgreSQL server of their own, and accounts seeded straight into a store.
        .target(name: "DaemonHarness", dependencies: [
            "ATTestbed", "JSONRPC", "AccountStoreCore", "SQLiteStore", "PostgresStore", "DPoP", "ATOAuth", logging,
        ] + nio),
        // Helpers shared by the test suites: dnsmasq, the hermetic network, DaemonHarness again.
        .target(name: "BlueskyTesting", dependencies: ["DaemonHarness", "JSONRPC", "WebBasics", "BlueskyHTTP"] + nio,
                path: "Tests/BlueskyTesting"),
        .executableTarget(name: "blueskyd-bench", dependencies: [
            "ATTestbed", "DaemonHarness", "JSONRPC", "AccountStoreCore", "SQLiteStore", "PostgresStore", "DPoP", "ATOAuth", "OAuth2Client", "BlueskyHTTP",
            "WebBasics", logging,
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ] + nio),

        .testTarget(name: "ATPermissionsTests", dependencies: ["ATPermissions"]),
        .testTarget(name: "ATSyntaxTests", dependencies: ["ATSyntax"], resources: [.copy("Fixtures")]),
        .testTarget(name: "ATIdentityTests", dependencies: ["ATIdentity", "BlueskyTesting"]),
        .testTarget(name: "AccountStoreTests", dependencies: [
            "AccountStoreCore", "SQLiteStore", "PostgresStore", "BlueskyTesting", "ATTestbed",
            .product(name: "GRDB", package: "GRDB.swift"),
        ]),
        .testTarget(name: "JSONRPCTests", dependencies: ["JSONRPC", "RPCServer"], resources: [.copy("Fixtures")]),
        .testTarget(name: "BlueskyHTTPTests", dependencies: [
            "BlueskyHTTP", .product(name: "NIOHTTP1", package: "swift-nio"),
        ] + nio),
        .testTarget(name: "XRPCTests", dependencies: ["XRPC", "BlueskyHTTP", "BlueskyTesting"]),
        .testTarget(name: "BlueskyDaemonTests", dependencies: [
            "BlueskyDaemon", "BlueskyHTTP", "JSONRPC", "ATOAuth", "XRPC", "AccountStoreCore", "BlueskyTesting", "RPCServer",
            "ATIdentity", "WebBasics", "ATPermissions", "OAuth2Client",
            .product(name: "PropertyBased", package: "swift-property-based"),
        ]),
        .testTarget(name: "ATTestbedTests", dependencies: [
            "ATTestbed", "BlueskyTesting", "ATOAuth", "DPoP", "BlueskyHTTP", "JSONRPC", "WebBasics",
            .product(name: "Crypto", package: "swift-crypto"),
        ]),
        .testTarget(name: "EndToEndTests", dependencies: ["BlueskyTesting", "DaemonHarness", "ATTestbed", "JSONRPC", "BlueskyHTTP",
                                                          .product(name: "Crypto", package: "swift-crypto")],
                    exclude: ["gateway_sdk_client.py", "parse_metrics.py", "mastodon_sdk_client.py", "orphaned_write.py"]),
        .testTarget(name: "XRPCGatewayTests", dependencies: [
            "XRPCGateway", "RPCServer", "JSONRPC", "BlueskyHTTP", "BlueskyTesting",
            .product(name: "NIOHTTP1", package: "swift-nio"),
        ] + nio),
        .testTarget(name: "BskyCtlKitTests", dependencies: ["BskyCtlKit", "JSONRPC"]),

        // atproto OAuth building blocks: DPoP proofs (RFC 9449, the client's side; ATTestbed
        // verifies them), then the OAuth client's pure pieces.
        .target(name: "DPoP", dependencies: ["JSONRPC", "WebBasics", .product(name: "Crypto", package: "swift-crypto")]),
        .target(name: "ATOAuth", dependencies: [
            "DPoP", "ATSyntax", "BlueskyHTTP", "JSONRPC", "WebBasics", .product(name: "Crypto", package: "swift-crypto"),
        ]),
        .testTarget(name: "DPoPTests", dependencies: ["DPoP", "BlueskyTesting", .product(name: "Crypto", package: "swift-crypto")],
                    exclude: ["verify_dpop_proof.py"]),
        // Accounts on any OAuth 2.0 server (issue 19): discovery, registration, the
        // authorization code with PKCE, tokens and revocation.
        .target(name: "OAuth2Client", dependencies: ["ATOAuth", "BlueskyHTTP", "JSONRPC", "WebBasics"]),
        .testTarget(name: "OAuth2ClientTests", dependencies: [
            "OAuth2Client", "ATOAuth", "ATTestbed", "BlueskyHTTP", "BlueskyTesting", "DaemonHarness", "JSONRPC",
        ], exclude: ["authlib_server.py"]),
        .testTarget(name: "ATOAuthTests", dependencies: [
            "ATOAuth", "DPoP", "ATTestbed", "BlueskyHTTP", "JSONRPC", .product(name: "Crypto", package: "swift-crypto"),
        ]),
        .testTarget(name: "WebBasicsTests", dependencies: ["WebBasics"]),
        .testTarget(name: "SystemdGlueTests", dependencies: ["SystemdGlue", logging]),
    ]
)
