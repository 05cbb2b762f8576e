import ATTestbed
import ArgumentParser
import Dispatch
import Foundation

/// `atproto-testbed`: runs a local AT Protocol network (PLC, handles, PDS) over HTTPS until
/// SIGTERM or SIGINT, after printing one JSON line that says how to reach it.
@main
struct AtprotoTestbedCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "atproto-testbed",
        abstract: "Run a local AT Protocol network (PLC directory, handle hosts, PDS) over HTTPS.",
        discussion: """
            Prints one JSON line on stdout once listening:
            {"caFile":…,"plcURL":…,"pdsURL":…,"port":…,"accounts":[{"did","handle","password","appPassword"}],
             "oauth":{"issuer","rogueIssuer","protectedResourceMetadata","authorizationServerMetadata",
                      "pushedAuthorizationRequestEndpoint","authorizationEndpoint","tokenEndpoint",
                      "revocationEndpoint","clients","accessTokenLifetime","sessionLifetime","noncePeriod"}}
            then serves until SIGTERM or SIGINT. OAuth logins use a loopback client_id
            (http://localhost?redirect_uri=http%3A%2F%2F127.0.0.1%3A<port>%2Fcallback&scope=…) with an
            account's handle as login_hint; the authorize endpoint approves without asking.
            """
    )

    @Option(help: "Domain: hosts are plc.<domain>, pds.<domain> and <name>.<domain>.")
    var domain = "tb1.test"

    @Option(help: "Address to listen on.")
    var address = "127.0.0.1"

    @Option(help: "Port to listen on (0 = ephemeral).")
    var port = 443

    @Option(help: "Directory for ca.pem (created if missing).")
    var dir = "/tmp/atproto-testbed"

    @Option(help: "Access token lifetime in seconds.")
    var accessTokenLifetime: Double = 7200

    @Option(help: "Refresh token lifetime in seconds.")
    var refreshTokenLifetime: Double = 90 * 24 * 3600

    @Option(help: "Seconds a rotated refresh token keeps returning its successor.")
    var refreshGracePeriod: Double = 7200

    @Option(help: "OAuth access token lifetime (expires_in) in seconds.")
    var oauthAccessTokenLifetime: Double = 15 * 60

    @Option(help: "OAuth session lifetime for public clients in seconds.")
    var oauthSessionLifetime: Double = 14 * 24 * 3600

    @Option(help: "Seconds between DPoP nonce rotations (authorization server and PDS).")
    var dpopNoncePeriod: Double = 60

    @Option(help: "An account as name:password:app-password (repeatable).")
    var account: [String] = []

    @Option(help: "Posts to create for each account (for timelines).")
    var posts = 0

    @Flag(help: "Use the hermetic test network: the first free 127.0.0.N:443 with domain tbN.test.")
    var hermetic = false

    func validate() throws {
        for spec in account where spec.split(separator: ":", maxSplits: 2).count != 3 {
            throw ValidationError("--account must be name:password:app-password, got '\(spec.prefix { $0 != ":" }):…'")
        }
        guard accessTokenLifetime >= 1 else { throw ValidationError("--access-token-lifetime must be at least 1") }
        guard oauthAccessTokenLifetime >= 1 else { throw ValidationError("--oauth-access-token-lifetime must be at least 1") }
        guard dpopNoncePeriod >= 1 else { throw ValidationError("--dpop-nonce-period must be at least 1") }
    }

    func run() async throws {
        // Ignore the default actions so the dispatch sources below see the signals.
        signal(SIGTERM, SIG_IGN)
        signal(SIGINT, SIG_IGN)
        let stopRequested = AsyncStream<Void>.makeStream()
        let sources = [SIGTERM, SIGINT].map { number in
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { stopRequested.continuation.yield() }
            source.resume()
            return source
        }
        defer { sources.forEach { $0.cancel() } }

        let testbed = try await startTestbed()
        var created: [TestAccount] = []
        for spec in account {
            let parts = spec.split(separator: ":", maxSplits: 2).map(String.init)
            created.append(
                await testbed.createAccount(
                    AccountSpec(name: parts[0], password: parts[1], appPassword: parts[2], initialPosts: posts)))
        }
        try printReadyLine(testbed: testbed, accounts: created)

        for await _ in stopRequested.stream { break }
        try await testbed.shutdown()
    }

    private func startTestbed() async throws -> Testbed {
        let apply: (inout TestbedConfiguration) -> Void = { configuration in
            configuration.accessTokenLifetime = .milliseconds(Int64(accessTokenLifetime * 1000))
            configuration.refreshTokenLifetime = .milliseconds(Int64(refreshTokenLifetime * 1000))
            configuration.refreshGracePeriod = .milliseconds(Int64(refreshGracePeriod * 1000))
            configuration.oauthAccessTokenLifetime = .milliseconds(Int64(oauthAccessTokenLifetime * 1000))
            configuration.oauthSessionLifetime = .milliseconds(Int64(oauthSessionLifetime * 1000))
            configuration.dpopNonceRotationPeriod = .milliseconds(Int64(dpopNoncePeriod * 1000))
        }
        if hermetic {
            return try await Testbed.startInHermeticNetwork(directory: dir, configure: apply)
        }
        var configuration = TestbedConfiguration(domain: domain, bindAddress: address, port: port, directory: dir)
        apply(&configuration)
        return try await Testbed.start(configuration)
    }

    private struct ReadyLine: Encodable {
        struct Account: Encodable {
            let did, handle, password, appPassword: String
        }
        /// What an OAuth login needs: the issuer the PDS names, its endpoints, the clients it accepts.
        struct OAuth: Encodable {
            let issuer, rogueIssuer, protectedResourceMetadata, authorizationServerMetadata: String
            let pushedAuthorizationRequestEndpoint, authorizationEndpoint, tokenEndpoint, revocationEndpoint: String
            let clients: String
            let accessTokenLifetime, sessionLifetime, noncePeriod: Double
        }
        let caFile, plcURL, pdsURL, domain: String
        let port: Int
        let accounts: [Account]
        let oauth: OAuth
    }

    private func printReadyLine(testbed: Testbed, accounts: [TestAccount]) throws {
        let line = ReadyLine(
            caFile: testbed.caFile, plcURL: testbed.plcURL, pdsURL: testbed.pdsURL,
            domain: testbed.configuration.domain, port: testbed.port,
            accounts: accounts.map { .init(did: $0.did, handle: $0.handle, password: $0.password, appPassword: $0.appPassword) },
            oauth: .init(
                issuer: testbed.oauthIssuer, rogueIssuer: testbed.rogueOAuthIssuer,
                protectedResourceMetadata: testbed.protectedResourceMetadataURL,
                authorizationServerMetadata: testbed.oauthIssuer + "/.well-known/oauth-authorization-server",
                pushedAuthorizationRequestEndpoint: testbed.oauthIssuer + "/oauth/par",
                authorizationEndpoint: testbed.oauthIssuer + "/oauth/authorize",
                tokenEndpoint: testbed.oauthIssuer + "/oauth/token",
                revocationEndpoint: testbed.oauthIssuer + "/oauth/revoke",
                clients: "loopback: http://localhost?redirect_uri=...&scope=... (login_hint: a handle or DID)",
                accessTokenLifetime: oauthAccessTokenLifetime, sessionLifetime: oauthSessionLifetime,
                noncePeriod: dpopNoncePeriod))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        FileHandle.standardOutput.write(try encoder.encode(line) + Data("\n".utf8))
    }
}
