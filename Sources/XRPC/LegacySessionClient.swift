import BlueskyHTTP
import Foundation

/// The app-password session endpoints of a PDS (`com.atproto.server.*Session`).
public struct LegacySessionClient: Sendable {
    public let http: any HTTPFetching
    public var timeout: Duration

    public init(http: any HTTPFetching, timeout: Duration = .seconds(30)) {
        self.http = http
        self.timeout = timeout
    }

    /// Logs in with a handle or DID and a password (an app password, ideally).
    public func createSession(pds: URL, identifier: String, password: String,
                              authFactorToken: String? = nil) async throws(SessionError) -> LegacySession {
        var input: [String: String] = ["identifier": identifier, "password": password]
        if let authFactorToken { input["authFactorToken"] = authFactorToken }
        let body = (try? JSONEncoder().encode(input)).map(Array.init) ?? []
        let request = XRPCRequest(service: pds, nsid: "com.atproto.server.createSession", kind: .procedure,
                                  body: .json(body))
        do {
            return try Self.session(from: try await send(request, authorization: nil))
        } catch SessionError.rejected(let reason) {
            // At login a 4xx rejection means the identifier or password was refused.
            throw .authenticationFailed(reason)
        }
    }

    /// Rotates both tokens. The returned refresh token replaces the old one for good.
    ///
    /// Only the reference PDS's answers to a revoked, expired or unverifiable refresh token
    /// (`ExpiredToken`, `InvalidToken`) and a taken-down account (`AccountTakedown`) reject
    /// the session; any other failure is `transient`, and a success that cannot be read is
    /// `noAnswer` (the token may be spent).
    public func refreshSession(pds: URL, refreshJwt: String) async throws(SessionError) -> LegacySession {
        let request = XRPCRequest(service: pds, nsid: "com.atproto.server.refreshSession", kind: .procedure)
        let response = try await send(request, authorization: "Bearer \(refreshJwt)", classify: Self.classifyRefresh)
        do {
            return try Self.session(from: response)
        } catch {
            throw .noAnswer(error.reason)
        }
    }

    /// The XRPC error names with which the reference PDS refuses a refresh token for good.
    static let definitiveRefreshErrors: Set<String> = ["ExpiredToken", "InvalidToken", "AccountTakedown"]

    /// Maps a failed refresh answer: definitive only for `definitiveRefreshErrors`.
    static func classifyRefresh(_ response: InboundResponse) -> SessionError {
        let body = XRPCErrorBody(response: response)
        let summary = body?.summary ?? "HTTP \(response.status)"
        switch body?.error {
        case "ExpiredToken": return .expiredToken(summary)
        case let name? where definitiveRefreshErrors.contains(name) && !response.isTransientFailure: return .rejected(summary)
        default: return .transient("HTTP \(response.status): \(summary)", retryAfter: response.serverAskedWait())
        }
    }

    /// Ends the server session; the refresh token stops working.
    public func deleteSession(pds: URL, refreshJwt: String) async throws(SessionError) {
        let request = XRPCRequest(service: pds, nsid: "com.atproto.server.deleteSession", kind: .procedure)
        _ = try await send(request, authorization: "Bearer \(refreshJwt)")
    }

    private func send(_ request: XRPCRequest, authorization: String?,
                      classify: (InboundResponse) -> SessionError = Self.classify) async throws(SessionError) -> InboundResponse {
        let response: InboundResponse
        do {
            response = try await http.send(request.outbound(authorization: authorization), timeout: timeout)
        } catch {
            switch error {
            case .invalidURL, .insecureURL, .unusableCAFile:
                // Refused before anything was sent.
                throw .protocolViolation(error.description)
            case .timedOut, .unreachable, .bodyTooLarge, .mayHaveBeenReceived:
                // The server may have read the request (and, for a refresh, rotated the token):
                // an answer too large to read is still an answer lost.
                throw .noAnswer(error.description)
            }
        }
        guard (200..<300).contains(response.status) else { throw classify(response) }
        return response
    }

    /// Maps a failed session response onto what the daemon should do.
    static func classify(_ response: InboundResponse) -> SessionError {
        let body = XRPCErrorBody(response: response)
        let summary = body?.summary ?? "HTTP \(response.status)"
        if response.isTransientFailure {
            return .transient("HTTP \(response.status): \(summary)", retryAfter: response.serverAskedWait())
        }
        switch body?.error {
        case "AuthFactorTokenRequired": return .authFactorTokenRequired(body?.message ?? summary)
        case "ExpiredToken": return .expiredToken(summary)
        default:
            if response.status == 400 || response.status == 401 || response.status == 403 {
                return .rejected(summary)
            }
            return .protocolViolation("HTTP \(response.status): \(summary)")
        }
    }

    private struct SessionBody: Decodable {
        var did: String
        var handle: String?
        var accessJwt: String
        var refreshJwt: String
        var didDoc: DIDDocumentSketch?
    }

    private struct DIDDocumentSketch: Decodable {
        struct Service: Decodable { var id: String; var serviceEndpoint: String? }
        var service: [Service]?
    }

    static func session(from response: InboundResponse) throws(SessionError) -> LegacySession {
        guard let body = try? JSONDecoder().decode(SessionBody.self, from: Data(response.body)) else {
            throw .protocolViolation("session answer is not a session object")
        }
        let pds = body.didDoc?.service?.first { $0.id.hasSuffix("#atproto_pds") }?.serviceEndpoint.flatMap(URL.init(string:))
        return LegacySession(did: body.did, handle: body.handle, accessJwt: body.accessJwt,
                             refreshJwt: body.refreshJwt, didDocumentPDS: pds)
    }
}
