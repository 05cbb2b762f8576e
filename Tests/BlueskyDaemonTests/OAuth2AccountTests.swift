@testable import BlueskyDaemon
import AccountStoreCore
import ATPermissions
import Foundation
import OAuth2Client
import Testing
import WebBasics

@Suite("OAuth 2.0 accounts: paths, keys, providers, sessions without a refresh token")
struct OAuth2AccountUnitTests {
    @Test("a call's path stays a path on the account's server: URLs, dot segments, escaped slashes and dots are refused")
    func paths() throws {
        for path in ["/api/v1/statuses", "/api/me", "/", "/api/v1/accounts/109/", "/tags/caf%C3%A9"] {
            #expect(throws: Never.self, "\(path)") { _ = try HTTPCall.normalised(path) }
        }
        for path in ["api/v1", "https://evil.test/", "//evil.test/x", "/api/../oauth/token", "/api/./x", "/api/%2e%2e/x",
                     "/api%2Fx", "/a b", "/x?y=1", "/x#frag", "/a\\b", "/%zz", "/api/..", "/.", "/a//"] {
            #expect(throws: DaemonError.self, "\(path)") { _ = try HTTPCall.normalised(path) }
        }
        let call = try HTTPCall(account: nil, method: "post", path: "/api/v1/statuses", query: "?visibility=direct",
                                headers: [("Authorization", "Bearer stolen"), ("Cookie", "a=b"), ("Content-Type", "text/plain"),
                                          ("Idempotency-Key", "k1")], body: nil)
        #expect(call.method == "POST" && call.query == "visibility=direct")
        #expect(call.headers.map(\.0) == ["content-type", "idempotency-key"], "the caller's credentials never go out")
        #expect(call.url(origin: URL(string: "https://social.example")!)?.absoluteString == "https://social.example/api/v1/statuses?visibility=direct")
        #expect(throws: DaemonError.self) { _ = try HTTPCall(account: nil, method: "GET", path: "/", query: nil, headers: [("X", "a\r\nb")], body: nil) }
        #expect(throws: DaemonError.self) { _ = try HTTPCall(account: nil, method: "GE T", path: "/", query: nil, headers: [], body: nil) }
    }

    @Test("no header or body makes a call another method or path than the policy saw; answers come unencoded; query values of any scalar type")
    func overrides() throws {
        #expect(throws: DaemonError.self) { _ = try HTTPCall.normalised("/api/..;/admin") }
        #expect(throws: DaemonError.self) { _ = try HTTPCall.normalised("/api/.;x=1/admin") }
        #expect(throws: Never.self) { _ = try HTTPCall.normalised("/api/v1;jsessionid=1/statuses") }
        let call = try HTTPCall(account: nil, method: "POST", path: "/api/v1/statuses", query: nil, headers: [
            ("X-HTTP-Method-Override", "DELETE"), ("X-Original-URL", "/admin"), ("X-Forwarded-For", "1.2.3.4"),
            ("Forwarded", "for=1.2.3.4"), ("Accept-Encoding", "gzip"), ("Accept", "application/json"),
        ], body: Array("status=hi&_method=delete".utf8))
        #expect(call.headers.map(\.0) == ["accept"])
        #expect(call.methodOverride != nil)
        #expect(try HTTPCall(account: nil, method: "POST", path: "/x", query: nil, headers: [], body: Array(#"{"_method":"PATCH"}"#.utf8)).methodOverride != nil)
        #expect(try HTTPCall(account: nil, method: "POST", path: "/x", query: nil, headers: [], body: Array("status=my_method".utf8)).methodOverride == nil)
        let query = try HTTPCall(params: Params(["path": "/api/v1/timelines/home", "query": ["limit": 40, "local": true, "tag": ["a", "b"]]]))
        #expect(query.query == "limit=40&local=true&tag=a&tag=b")
        #expect(throws: DaemonError.self) { _ = try HTTPCall(params: Params(["path": "/x", "body": ["a": 1], "bodyBase64": "AA=="])) }
        #expect(throws: DaemonError.self) { _ = try HTTPCall(params: Params(["path": "/x", "query": ["a": ["b": 1]]])) }
    }

    @Test("a 401 spends a refresh token only when it says the token is bad, or says nothing of a token old enough to have expired early")
    func refreshOn401() {
        #expect(HTTPCallProxy.refreshMayHelp(wwwAuthenticate: #"Bearer realm="Doorkeeper", error="invalid_token""#, tokenAge: 1))
        #expect(!HTTPCallProxy.refreshMayHelp(wwwAuthenticate: #"Bearer error="insufficient_scope""#, tokenAge: 3_600))
        #expect(!HTTPCallProxy.refreshMayHelp(wwwAuthenticate: nil, tokenAge: 5), "a fresh token refused for no stated reason")
        #expect(HTTPCallProxy.refreshMayHelp(wwwAuthenticate: "Bearer", tokenAge: 600))
    }

    @Test("http: permissions match method and path prefix; read covers GET and HEAD only")
    func permissions() throws {
        let grant = try PermissionGrant(parsing: "http:GET:/api/* http:POST:/api/v1/statuses")
        #expect(grant.grants(.http(method: "GET", path: "/api/v1/timelines/home")))
        #expect(grant.grants(.http(method: "POST", path: "/api/v1/statuses")))
        #expect(!grant.grants(.http(method: "POST", path: "/api/v1/statuses/1/reblog")))
        #expect(!grant.grants(.http(method: "DELETE", path: "/api/v1/statuses/1")))
        #expect(!grant.grants(.http(method: "GET", path: "/oauth/token")))
        #expect(try PermissionGrant(parsing: "http:*:/api/*").grants(.http(method: "DELETE", path: "/api/v1/statuses/1")))
        let read = try PermissionGrant(parsing: "read")
        #expect(read.grants(.http(method: "GET", path: "/x")) && read.grants(.http(method: "HEAD", path: "/x")))
        #expect(!read.grants(.http(method: "POST", path: "/x")))
        #expect(try Permission(parsing: "http:GET:/api/*").description == "http:GET:/api/*")
        for bad in ["http:get:/x", "http:GET:api", "http:GET", "http:GET:/a*b", "http:GET:/x?y"] {
            #expect(throws: PermissionSyntaxError.self, "\(bad)") { _ = try Permission(parsing: bad) }
        }
    }

    @Test("accounts are keyed by issuer and subject; handles carry the server's host")
    func keys() {
        #expect(OAuth2AccountKey.make(issuer: "https://social.example/", subject: "109") == "https://social.example#109")
        #expect(OAuth2AccountKey.handle("Alice", apiOrigin: "https://social.example") == "alice@social.example")
        #expect(OAuth2AccountKey.handle("@bob@elsewhere.example", apiOrigin: "https://social.example") == "bob@elsewhere.example")
        #expect(OAuth2AccountKey.handle(" ", apiOrigin: "https://social.example") == nil)
        #expect(OAuth2AccountKey.isOwn("alice@social.example", apiOrigin: "https://social.example"))
        #expect(!OAuth2AccountKey.isOwn("bob@mastodon.social", apiOrigin: "https://evil.example"), "another server's handle names nothing")
        #expect(AccountManager.covers("read write", "read") && !AccountManager.covers("read", "read write") && AccountManager.covers(nil, "x"))
    }

    @Test("profile answers are read by their field maps; numbers are subjects too; a missing subject is no profile")
    func profiles() throws {
        let mastodon = try #require(OAuth2ProfileFields.read(["id": "109", "acct": "alice", "display_name": "Alice", "avatar": "https://a/x.png", "note": ""],
                                                             fields: OAuth2ProfileFields.mastodon))
        #expect(mastodon == OAuth2Profile(subject: "109", handle: "alice", displayName: "Alice", avatar: "https://a/x.png", description: nil))
        #expect(OAuth2ProfileFields.read(["sub": 42, "name": "N"], fields: OAuth2ProfileFields.openID)?.subject == "42")
        #expect(OAuth2ProfileFields.read(["user": ["id": "7"]], fields: ["subject": "user.id"])?.subject == "7")
        #expect(OAuth2ProfileFields.read(["name": "N"], fields: OAuth2ProfileFields.openID) == nil)
        // NeoDB's /api/me as its documentation shows it (no username), and with one.
        let neodb = try #require(OAuth2ProfileFields.read(["url": "https://neodb.social/users/xxx/", "external_acct": "xxx@yyy.zzz",
                                                           "display_name": "XYZ", "avatar": "https://yyy.zzz/xxx.gif"], fields: OAuth2ProfileFields.neoDB))
        #expect(neodb.subject == "https://neodb.social/users/xxx/" && neodb.handle == nil && neodb.displayName == "XYZ")
        #expect(OAuth2ProfileFields.read(["username": "xxx", "url": "u"], fields: OAuth2ProfileFields.neoDB)?.subject == "xxx")
        let profile = AccountProfile(OAuth2Profile(subject: "1", avatar: "http://plain/x.png"), fetchedAt: Date())
        #expect(profile.avatar == nil, "only https avatars are passed on")
    }

    @Test("[[provider]] tables are checked strictly: names, https URLs, endpoints in pairs, field maps with a subject")
    func providerTables() throws {
        func parse(_ toml: String) throws -> [ProviderSettings] {
            var configuration = DaemonConfiguration(environment: ["HOME": "/home/u", "XDG_RUNTIME_DIR": "/run/user/1000"])
            try configuration.apply(toml: toml, file: "b.toml")
            return configuration.providers
        }
        let neodb = try parse("""
            [[provider]]
            name = "neodb"
            issuer = "https://neodb.social"
            profile_url = "https://neodb.social/api/me"
            profile_fields = { subject = "username", displayName = "display_name" }
            """)
        #expect(neodb.first?.profileFields == ["subject": "username", "displayName": "display_name"])
        #expect(neodb.first?.matches("https://neodb.social/") == true && neodb.first?.matches("neodb") == true)
        let mistakes: [(String, String)] = [
            ("[[provider]]\nname = \"Neo DB\"\nissuer = \"https://a\"", "a name of lowercase letters"),
            ("[[provider]]\nname = \"a\"", "needs an issuer"),
            ("[[provider]]\nname = \"a\"\nissuer = \"http://a.example\"", "is not an https URL"),
            ("[[provider]]\nname = \"a\"\nissuer = \"https://a\"\ntoken_endpoint = \"https://a/t\"", "give both authorization_endpoint and token_endpoint"),
            ("[[provider]]\nname = \"a\"\nissuer = \"https://a\"\nclient_secret = \"s\"", "client_secret needs the client_id"),
            ("[[provider]]\nname = \"a\"\nissuer = \"https://a\"\napp_registration_endpoint = \"https://a/api/v1/apps\"", "go with authorization_endpoint"),
            ("[[provider]]\nname = \"a\"\nissuer = \"https://a\"\nredirect_uri = \"http://127.0.0.1:5/cb\"", "redirect_uri needs the client_id"),
            ("[[provider]]\nname = \"a\"\nissuer = \"https://a\"\nclient_id = \"c\"\nredirect_uri = \"https://a/cb\"", "must be http://127.0.0.1"),
            ("[[provider]]\nname = \"a\"\nissuer = \"https://a\"\nprofile_url = \"https://a/me\"\nprofile_fields = { nick = \"n\" }", "unknown role 'nick'"),
            ("[[provider]]\nname = \"a\"\nissuer = \"https://a\"\nscopes = \"read\"", "unknown key 'scopes'"),
            ("[[provider]]\nname = \"a\"\nissuer = \"https://a\"\n[[provider]]\nname = \"b\"\nissuer = \"https://a/\"", "two providers have the issuer"),
        ]
        for (toml, words) in mistakes {
            #expect(throws: ConfigurationError.self, "\(words)") { _ = try parse(toml) }
            do { _ = try parse(toml) } catch { #expect("\(error)".contains(words), "\(error)") }
        }
    }

    @Test("a session without a refresh token is looked at once ahead of its end (to warn), then at its end; never refreshed")
    func accessOnlyDates() {
        let now = Date()
        var record = AccountRecord(did: "https://sso.example#u", pds: "https://sso.example", authKind: .oauth2, lastRefreshAt: now,
                                   accessExpiresAt: now.addingTimeInterval(8 * 3600), oauth: OAuthSessionInfo(
            issuer: "https://sso.example", tokenEndpoint: "https://sso.example/token", revocationEndpoint: nil, scope: "profile",
            sessionStartedAt: now, clientKind: .oauth2AccessOnly, clientID: "c"))
        #expect(record.sessionEndsAt == record.accessExpiresAt)
        #expect(record.sessionEndWarningAt == now.addingTimeInterval(6 * 3600), "a quarter of the token's life ahead")
        let rules = AccountLifecycle.Rules(refreshAhead: .seconds(300), backoff: Backoff(initial: .seconds(5), maximum: .seconds(600)))
        var state = AccountLifecycle.State(record: record)
        #expect(AccountLifecycle.nextDue(state, rules: rules, now: now)?.date == now.addingTimeInterval(6 * 3600))
        #expect(AccountLifecycle.nextDue(state, rules: rules, now: now.addingTimeInterval(7 * 3600))?.date == record.accessExpiresAt)
        record.oauth?.clientKind = .oauth2
        state = AccountLifecycle.State(record: record)
        #expect(record.sessionEndsAt == nil, "a refresh token keeps the session: no known end")
        let planned = AccountLifecycle.nextDue(state, rules: rules, now: now)?.date
        #expect(planned.map { $0 < record.accessExpiresAt! && $0 > now } == true, "refreshed ahead of expiry")
    }
}
