import AsyncHTTPClient
import BlueskyHTTP
import DaemonHarness
import Foundation
import JSONRPC
import NIOCore
import NIOHTTP1
import NIOPosix
import OAuth2Client

/// Sections 12 and 13, for an OAuth 2.0 server's account: blueskyd signed in to the testbed's
/// Mastodon-compatible instance, its `http.call` and gateway `/http/<account>/…` calls of
/// `verify_credentials` measured beside the same call made straight to the instance with a
/// bearer token of the benchmark's own login.
struct OAuth2Bench {
    static let sections = ["oauth2-throughput", "oauth2-latency"]
    static let path = "/api/v1/accounts/verify_credentials"

    let options: BenchOptions
    let upstream: StartedUpstream
    let workDirectory: String
    let progress: ProgressLog

    func run(into report: inout BenchReport) async {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)
        var daemon: DaemonProcess?
        do {
            let client = try DirectClient.make(caFile: upstream.info.caFile, connections: options.connections, group: group)
            let loginHTTP = try OutboundHTTP(.init(extraCAFile: upstream.info.caFile))
            defer {
                Task { try? await loginHTTP.shutdown() }
            }
            let started = try await startLoggedInDaemon(loginHTTP: loginHTTP)
            daemon = started.daemon
            progress.say("oauth2: logging in directly at \(upstream.info.mastodonURL)")
            let token = try await directLogin(http: loginHTTP)
            var headers = HTTPHeaders()
            headers.add(name: "Authorization", value: "Bearer \(token)")
            let direct = DirectEndpoint(client: client, request: try HTTPClient.Request(
                url: upstream.info.mastodonURL + Self.path, method: .GET, headers: headers))
            guard try await direct.callOnce().get() else { throw BenchError.unexpectedReply("the direct verify_credentials call did not return 200") }
            let line = BenchRequest.line(method: "http.call", params: ["account": .string(started.account), "path": .string(Self.path)])
            let sides = SideBySide(options: options, progress: progress, prefix: "oauth2-", daemon: started.daemon, requestLine: line,
                                   group: group, latencyTarget: LatencyResult.appPasswordTarget, gatewayDID: nil,
                                   callName: "GET " + Self.path, gatewayURI: "/http/\(started.account)\(Self.path)")
            if options.wants("oauth2-throughput") {
                do { report.oauth2Throughput = try await sides.throughput(direct: direct) } catch {
                    report.problems.append("oauth2-throughput: \(describe(error))")
                }
            }
            if options.wants("oauth2-latency") {
                do { report.oauth2Latency = try await sides.latency(direct: direct) } catch {
                    report.problems.append("oauth2-latency: \(describe(error))")
                }
            }
            try? await client.shutdown()
        } catch {
            report.problems.append("oauth2: \(describe(error))")
        }
        if let daemon {
            _ = await daemon.stop()
            Watchdog.untrack(daemon.pid)
        }
        try? await group.shutdownGracefully()
    }

    /// blueskyd on a fresh state directory, signed in to the instance (the redirect pasted, as
    /// `bskyctl login --no-browser` does); the account's id.
    private func startLoggedInDaemon(loginHTTP: OutboundHTTP) async throws -> (daemon: DaemonProcess, account: String) {
        progress.say("oauth2: starting blueskyd and signing it in at \(upstream.info.mastodonURL)")
        let directory = workDirectory + "/oauth2"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let daemon: DaemonProcess
        do {
            daemon = try await DaemonProcess(directory: directory, testbed: nil, extraArguments: DaemonArguments.forUpstream(upstream.info))
        } catch {
            throw BenchError.daemonFailed(describe(error))
        }
        Watchdog.track(daemon.pid)
        do {
            let begun = try await daemon.call("accounts.oauth.begin", ["identifier": .string(upstream.info.mastodonURL)])
            guard let loginID = begun["loginID"]?.stringValue,
                  let url = begun["authorizationURL"]?.stringValue.flatMap(URL.init(string:)) else {
                throw BenchError.oauthLoginFailed("accounts.oauth.begin answered without a login id or URL")
            }
            let redirect = try await AuthorizationRedirect.follow(url, http: loginHTTP)
            let done = try await daemon.call("accounts.oauth.complete", ["loginID": .string(loginID), "redirectURL": .string(redirect.absoluteString)])
            guard done["account"]?["auth"] == "oauth2", let id = done["account"]?["id"]?.stringValue else {
                throw BenchError.oauthLoginFailed("no oauth2 account was stored")
            }
            return (daemon, id)
        } catch {
            _ = await daemon.stop()
            Watchdog.untrack(daemon.pid)
            throw error
        }
    }

    /// The benchmark's own login at the instance (its own app), for the direct side.
    private func directLogin(http: OutboundHTTP) async throws -> String {
        let redirectURI = "http://127.0.0.1:9/callback"
        let metadata = try await ProviderDiscovery(http: http, timeout: .seconds(30)).discover(issuer: upstream.info.mastodonURL)
        let client = try await ClientRegistration(http: http, timeout: .seconds(30))
            .register(at: metadata, clientName: "blueskyd-bench", redirectURI: redirectURI, scope: "read write")
        let login = AuthorizationCode(metadata: metadata, client: client, redirectURI: redirectURI, scope: "read write")
        let redirect = try await AuthorizationRedirect.follow(login.authorizationURL, http: http)
        let code = try login.code(fromRedirect: redirect.absoluteString)
        return try await OAuth2TokenClient(metadata: metadata, client: client, http: http, timeout: .seconds(30))
            .exchange(code: code, verifier: login.pkce.verifier, redirectURI: redirectURI).accessToken
    }
}
