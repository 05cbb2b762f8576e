import ATOAuth
import DPoP
import Foundation
import Testing

@Suite("Authorization callback")
struct CallbackTests {
    let issuer = "https://auth.example.com"
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    func pending(state: String = "s1") -> (PendingAuthorizations, PendingAuthorization) {
        let store = PendingAuthorizations(lifetime: 600)
        let authorization = PendingAuthorization(state: state, issuer: issuer, pkce: .generate(),
                                                 redirectURI: "http://127.0.0.1:8080/callback", dpopKey: .generate(),
                                                 createdAt: start)
        store.insert(authorization)
        return (store, authorization)
    }

    func callback(_ query: String) throws -> AuthorizationCallback {
        try AuthorizationCallback(redirectURL: URL(string: "http://127.0.0.1:8080/callback?" + query)!)
    }

    @Test("a good callback gives the code and the login it completes, once")
    func accepted() throws {
        let (store, authorization) = pending()
        let result = try store.complete(try callback("code=c0de&state=s1&iss=https%3A%2F%2Fauth.example.com"), now: start)
        #expect(result.code == "c0de")
        #expect(result.authorization.pkce == authorization.pkce)
        #expect(result.authorization.dpopKey.thumbprint == authorization.dpopKey.thumbprint)
        #expect(store.count == 0)
        #expect(throws: CallbackError.stateAlreadyUsed) {
            try store.complete(try callback("code=c0de&state=s1&iss=https%3A%2F%2Fauth.example.com"), now: start)
        }
    }

    @Test("query parsing failures")
    func parsing() {
        // Raw query text, as the callback listener receives it (URL(string:) would re-encode the stray %).
        #expect(throws: CallbackError.malformedQuery) { try AuthorizationCallback(query: "code=%zz&state=s1") }
        #expect(throws: CallbackError.malformedQuery) { try AuthorizationCallback(query: "code=c&state=%FF") }
        #expect(throws: CallbackError.duplicateParameter("state")) { try callback("code=c&state=s1&state=s2") }
        #expect(throws: CallbackError.duplicateParameter("code")) { try callback("code=c&code=d&state=s1") }
    }

    @Test("each state and issuer failure is its own error", arguments: [
        ("code=c&iss=https%3A%2F%2Fauth.example.com", CallbackError.missingState),
        ("code=c&state=&iss=https%3A%2F%2Fauth.example.com", .missingState),
        ("code=c&state=forged&iss=https%3A%2F%2Fauth.example.com", .unknownState),
        ("code=c&state=s1", .missingIssuer),
        ("code=c&state=s1&iss=https%3A%2F%2Fevil.example.com", .issuerMismatch(expected: "https://auth.example.com", actual: "https://evil.example.com")),
        ("code=c&state=s1&iss=https%3A%2F%2Fauth.example.com%2F", .issuerMismatch(expected: "https://auth.example.com", actual: "https://auth.example.com/")),
        ("state=s1&iss=https%3A%2F%2Fauth.example.com", .missingCode),
        ("error=access_denied&error_description=The+user+said+no&state=s1&iss=https%3A%2F%2Fauth.example.com",
         .authorizationFailed(error: "access_denied", description: "The user said no")),
    ])
    func failures(query: String, expected: CallbackError) throws {
        let (store, _) = pending()
        let parsed = try callback(query)
        #expect(throws: expected) { try store.complete(parsed, now: start) }
    }

    @Test("a failed answer to a known state still uses it up")
    func consumedOnError() throws {
        let (store, _) = pending()
        #expect(throws: CallbackError.missingIssuer) { try store.complete(try callback("code=c&state=s1"), now: start) }
        #expect(throws: CallbackError.stateAlreadyUsed) {
            try store.complete(try callback("code=c&state=s1&iss=https%3A%2F%2Fauth.example.com"), now: start)
        }
    }

    @Test("a login older than the lifetime is refused, and expired logins can be swept")
    func expiry() throws {
        let (store, _) = pending()
        #expect(throws: CallbackError.expired) {
            try store.complete(try callback("code=c&state=s1&iss=https%3A%2F%2Fauth.example.com"), now: start.addingTimeInterval(601))
        }
        let (other, _) = pending(state: "s2")
        other.removeExpired(now: start.addingTimeInterval(599))
        #expect(other.count == 1)
        other.removeExpired(now: start.addingTimeInterval(601))
        #expect(other.count == 0)
    }

    @Test("printing a callback hides the code")
    func redacted() throws {
        #expect(!"\(try callback("code=secret-code&state=s1"))".contains("secret-code"))
    }
}
