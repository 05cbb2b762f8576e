import ATSyntax
import Foundation
import JSONRPC

/// When every response is received: a fixed instant keeps runs reproducible.
private let receivedAt = Date(timeIntervalSince1970: 1_795_000_000)

/// libFuzzer entry point: one input is the body of a token endpoint response (code exchange or
/// refresh), checked by `OAuthTokenSet(responseBody:expectedDID:receivedAt:)`.
///
/// A token set is accepted only with each documented rule holding, as read independently from
/// the same JSON: non-empty tokens, a DPoP token type, a scope with the `atproto` token, a
/// `sub` that is a DID, a positive whole `expires_in` giving a later expiry. The `sub` check
/// against a known account accepts that account and refuses any other, and the accepted set
/// reads back the same when written out as a token response again.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTokenResponse(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let body = fuzzInput(start, count)
    let object = (try? JSONValue.parse(body))?.objectValue
    let tokens: OAuthTokenSet
    do {
        tokens = try OAuthTokenSet(responseBody: body, expectedDID: nil, receivedAt: receivedAt)
    } catch {
        require((error == .notJSON) == (object == nil), "a JSON object refused as not JSON, or the reverse")
        return 0
    }
    guard let object else {
        require(false, "a token set from a body that is not a JSON object")
        return 0
    }
    checkRules(tokens, object: object)
    checkExpectedSubject(tokens, body: body)
    checkRewritten(tokens)
    return 0
}

private func checkRules(_ tokens: OAuthTokenSet, object: [String: JSONValue]) {
    require(!tokens.accessToken.isEmpty && object["access_token"]?.stringValue == tokens.accessToken, "access_token is not the one sent")
    require(!tokens.refreshToken.isEmpty && object["refresh_token"]?.stringValue == tokens.refreshToken, "refresh_token is not the one sent")
    require(object["token_type"]?.stringValue?.lowercased() == "dpop", "a token type other than DPoP accepted")
    require(object["scope"]?.stringValue == tokens.scope, "scope is not the one sent")
    require(tokens.scope.split(separator: " ").contains("atproto"), "a scope without atproto accepted: \(tokens.scope)")
    require(object["sub"]?.stringValue == tokens.did.string && DID(tokens.did.string) == tokens.did, "sub is not the DID sent")
    guard let expiresIn = object["expires_in"]?.intValue, expiresIn > 0 else {
        return require(false, "accepted without a positive whole expires_in")
    }
    require(tokens.expiresAt == receivedAt.addingTimeInterval(TimeInterval(expiresIn)), "the expiry is not receipt + expires_in")
    require(tokens.expiresAt > receivedAt, "the tokens expire before they arrive")
    // The description goes to logs: it names the account, never a token.
    require(tokens.description == "OAuthTokenSet(did: \(tokens.did), scope: \(tokens.scope), tokens redacted)",
            "the description is not the redacted one")
}

/// Refresh and re-login pass the account's DID: that one passes, any other is refused.
private func checkExpectedSubject(_ tokens: OAuthTokenSet, body: [UInt8]) {
    let same = try? OAuthTokenSet(responseBody: body, expectedDID: tokens.did.string, receivedAt: receivedAt)
    require(same == tokens, "the expected DID \(tokens.did) is refused")
    let other = tokens.did.string + "x"
    do {
        _ = try OAuthTokenSet(responseBody: body, expectedDID: other, receivedAt: receivedAt)
        require(false, "tokens for \(tokens.did) accepted for the account \(other)")
    } catch {
        require(error == .subjectMismatch(expected: other, actual: tokens.did.string), "refused for another reason: \(error)")
    }
}

private func checkRewritten(_ tokens: OAuthTokenSet) {
    let seconds = tokens.expiresAt.timeIntervalSince(receivedAt).rounded()
    let body = JSONValue.object([
        "access_token": .string(tokens.accessToken), "refresh_token": .string(tokens.refreshToken),
        "token_type": "DPoP", "scope": .string(tokens.scope), "sub": .string(tokens.did.string),
        "expires_in": .number(seconds),
    ]).encoded()
    let reread = try? OAuthTokenSet(responseBody: body, expectedDID: nil, receivedAt: receivedAt)
    require(reread?.accessToken == tokens.accessToken && reread?.refreshToken == tokens.refreshToken
            && reread?.did == tokens.did && reread?.scope == tokens.scope, "the token set does not read back")
}
