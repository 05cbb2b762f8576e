import ATTestbed
import BlueskyTesting
import Foundation

/// A testbed on an ephemeral port with a keep-alive connection to its PDS.
final class TestbedHarness: Sendable {
    let testbed: Testbed
    let pds: TestHTTPSConnection

    private init(testbed: Testbed, pds: TestHTTPSConnection) {
        self.testbed = testbed
        self.pds = pds
    }

    static func start(_ configure: (inout TestbedConfiguration) -> Void = { _ in }) async throws -> TestbedHarness {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("attestbed-tests-\(UUID().uuidString)").path
        var configuration = TestbedConfiguration(domain: "tb1.test", bindAddress: "127.0.0.1", port: 0, directory: directory)
        configure(&configuration)
        let testbed = try await Testbed.start(configuration)
        let pds = try await TestHTTPSConnection.open(testbed, host: "pds.\(configuration.domain)")
        return TestbedHarness(testbed: testbed, pds: pds)
    }

    /// A harness started with `configure` for `body`, stopped (awaited) when `body` returns or throws.
    @discardableResult
    static func with<T>(_ configure: (inout TestbedConfiguration) -> Void = { _ in },
                        _ body: (TestbedHarness) async throws -> T) async throws -> T {
        let harness = try await start(configure)
        return try await withTearDown { await harness.stop() } run: { try await body(harness) }
    }

    func connection(host: String) async throws -> TestHTTPSConnection {
        try await TestHTTPSConnection.open(testbed, host: host)
    }

    func stop() async {
        await pds.close()
        try? await testbed.shutdown()
        try? FileManager.default.removeItem(atPath: testbed.configuration.directory)
    }

    func createSession(_ identifier: String, _ password: String, authFactorToken: String? = nil) async throws
        -> TestResponse
    {
        var body: [String: any Sendable] = ["identifier": identifier, "password": password]
        if let authFactorToken { body["authFactorToken"] = authFactorToken }
        return try await pds.send(.post("/xrpc/com.atproto.server.createSession", json: body))
    }

    func refresh(_ refreshJwt: String) async throws -> TestResponse {
        try await pds.send(.post("/xrpc/com.atproto.server.refreshSession", bearer: refreshJwt))
    }

    func getSession(_ accessJwt: String) async throws -> TestResponse {
        try await pds.send(.get("/xrpc/com.atproto.server.getSession", bearer: accessJwt))
    }

    /// Logs in with the app password and returns the access and refresh tokens.
    func login(_ account: TestAccount) async throws -> (access: String, refresh: String) {
        let response = try await createSession(account.handle, account.appPassword)
        guard response.status == 200, let access = response["accessJwt"], let refresh = response["refreshJwt"] else {
            throw HarnessError.loginFailed(status: response.status, body: response.text)
        }
        return (access, refresh)
    }
}

enum HarnessError: Error, CustomStringConvertible {
    case loginFailed(status: Int, body: String)

    var description: String {
        switch self {
        case .loginFailed(let status, let body): "login failed with HTTP \(status): \(body)"
        }
    }
}

/// The claims of a JWT, unverified (what a client reads).
func jwtClaims(_ token: String) -> [String: any Sendable] {
    let parts = token.split(separator: ".")
    guard parts.count == 3 else { return [:] }
    var payload = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while payload.count % 4 != 0 { payload += "=" }
    guard let data = Data(base64Encoded: payload) else { return [:] }
    return ((try? JSONSerialization.jsonObject(with: data)) as? [String: any Sendable]) ?? [:]
}
