import BlueskyHTTP
import DaemonHarness
import Foundation
import JSONRPC

/// Logs an account in to blueskyd with OAuth, as `bskyctl login --no-browser` does:
/// `accounts.oauth.begin`, the authorization URL opened (the testbed approves at once), and
/// the redirect pasted back with `accounts.oauth.complete`.
enum DaemonOAuthLogin {
    static func login(daemon: DaemonProcess, did: String, http: any HTTPFetching) async throws {
        do {
            let started = try await daemon.call("accounts.oauth.begin", ["identifier": .string(did)])
            guard let loginID = started["loginID"]?.stringValue,
                  let authorizationURL = started["authorizationURL"]?.stringValue.flatMap(URL.init(string:)) else {
                throw BenchError.oauthLoginFailed("accounts.oauth.begin answered without a login id or URL")
            }
            let redirect = try await AuthorizationRedirect.follow(authorizationURL, http: http)
            let completed = try await daemon.call(
                "accounts.oauth.complete", ["loginID": .string(loginID), "redirectURL": .string(redirect.absoluteString)])
            guard completed["account"]?["did"]?.stringValue == did, completed["account"]?["auth"] == "oauth" else {
                throw BenchError.oauthLoginFailed("accounts.oauth.complete stored no OAuth account for the DID")
            }
        } catch let error as BenchError {
            throw error
        } catch {
            throw BenchError.oauthLoginFailed("through blueskyd: \(describe(error))")
        }
    }
}
