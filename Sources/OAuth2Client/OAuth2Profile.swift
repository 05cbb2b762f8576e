import BlueskyHTTP
import Foundation
import JSONRPC

/// Who signed in, as the server's profile endpoint says: a subject that never changes (the
/// account's key), a handle people recognise, and what a profile shows.
public struct OAuth2Profile: Sendable, Equatable {
    public var subject: String
    public var handle: String?
    public var displayName: String?
    public var avatar: String?
    public var description: String?

    public init(subject: String, handle: String? = nil, displayName: String? = nil, avatar: String? = nil, description: String? = nil) {
        self.subject = subject
        self.handle = handle
        self.displayName = displayName
        self.avatar = avatar
        self.description = description
    }
}

/// Which key of a profile answer holds which fact. Keys may be dotted (`user.name`) for nested
/// objects, and alternatives separated by `|` (the first present wins); numbers are read as
/// their decimal text (an `id` of 42 is the subject "42").
public enum OAuth2ProfileFields {
    public static let roles: Set<String> = ["subject", "handle", "displayName", "avatar", "description"]

    /// Mastodon's `GET /api/v1/accounts/verify_credentials`.
    public static let mastodon = ["subject": "id", "handle": "acct", "displayName": "display_name", "avatar": "avatar",
                                  "description": "note"]
    /// OpenID Connect's userinfo.
    public static let openID = ["subject": "sub", "handle": "preferred_username", "displayName": "name", "avatar": "picture"]
    /// NeoDB's `GET /api/me` (no numeric id: the username is the key, else the profile's URL,
    /// which holds it). Not `external_acct`, the fediverse account it signed in with: that is
    /// another server's handle, maybe of an account registered here too.
    public static let neoDB = ["subject": "username|url", "handle": "username", "displayName": "display_name", "avatar": "avatar"]

    /// Reads `document` by `fields`; nil when it has no subject.
    public static func read(_ document: JSONValue, fields: [String: String]) -> OAuth2Profile? {
        func text(_ role: String) -> String? {
            guard let paths = fields[role] else { return nil }
            for path in paths.split(separator: "|") {
                var value: JSONValue? = document
                for key in path.split(separator: ".") { value = value?[String(key)] }
                if let string = value?.stringValue, !string.isEmpty { return string }
                if let number = value?.doubleValue, number == number.rounded(), abs(number) < 1e15 { return String(Int64(number)) }
            }
            return nil
        }
        guard let subject = text("subject") else { return nil }
        return OAuth2Profile(subject: subject, handle: text("handle"), displayName: text("displayName"), avatar: text("avatar"),
                             description: text("description"))
    }
}

/// Reads the signed-in user's profile with the account's bearer token.
public struct OAuth2ProfileReader: Sendable {
    /// Why a profile could not be read.
    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// 401: the access token is no longer good (refresh, then ask again).
        case unauthorized
        case unavailable(String)
        case unusable(String)

        public var description: String {
            switch self {
            case .unauthorized: "the server refused the access token (HTTP 401)"
            case .unavailable(let reason): "the profile could not be fetched: \(reason)"
            case .unusable(let reason): "the profile answer is unusable: \(reason)"
            }
        }
    }

    let http: any HTTPFetching
    let timeout: Duration

    public init(http: any HTTPFetching, timeout: Duration) {
        self.http = http
        self.timeout = timeout
    }

    public func read(_ url: URL, accessToken: String, fields: [String: String]) async throws(Failure) -> OAuth2Profile {
        let response: InboundResponse
        do {
            response = try await http.send(OutboundRequest(url: url, headers: [("Authorization", "Bearer " + accessToken),
                                                                               ("Accept", "application/json")]),
                                           timeout: timeout)
        } catch {
            throw .unavailable("\(url.host ?? "the server"): \(error)")
        }
        if response.status == 401 { throw .unauthorized }
        guard (200..<300).contains(response.status) else { throw .unavailable("\(url.host ?? "the server") answered HTTP \(response.status)") }
        guard let document = try? JSONValue.parse(response.body), case .object = document else {
            throw .unusable("not a JSON object")
        }
        guard let profile = OAuth2ProfileFields.read(document, fields: fields) else {
            throw .unusable("no \(fields["subject"] ?? "subject") field to identify the account by")
        }
        return profile
    }
}

/// The `sub` claim of a JWT access token, read without checking its signature: only to name
/// the account of a server that offers no profile endpoint (the token came straight from its
/// token endpoint over TLS; nothing is authorised by it).
public enum JWTSubject {
    public static func of(_ token: String) -> String? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        var base64 = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64), let claims = try? JSONValue.parse(Array(data)) else { return nil }
        return claims["sub"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 }
    }
}
