import Foundation
import JSONRPC

/// `accounts.oauth.*`: the login methods (docs/PROTOCOL.md).
extension DaemonMethods {
    /// Longest a single `accounts.oauth.wait` may block.
    static let maxOAuthWait: Double = 3600

    func oauth(_ method: String, _ params: Params) async throws(DaemonError) -> JSONValue {
        switch method {
        case "accounts.oauth.begin":
            try params.allowOnly(["identifier", "scope", "makeDefault", "account"])
            let start = try await accounts.beginOAuthLogin(
                identifier: try params.requiredString("identifier"), scope: try params.optionalString("scope"),
                makeDefault: try params.bool("makeDefault", default: false), upgrading: try params.optionalString("account"))
            return ["loginID": .string(start.loginID), "authorizationURL": .string(start.authorizationURL.absoluteString),
                    "redirectURI": .string(start.redirectURI),
                    "redirectDelivery": .string(start.receivesRedirect ? "loopback" : "paste")]
        case "accounts.oauth.wait":
            try params.allowOnly(["loginID", "timeoutSeconds"])
            let seconds = try params.value("timeoutSeconds").map { value throws(DaemonError) -> Double in
                guard let number = value.doubleValue, number > 0, number <= Self.maxOAuthWait else {
                    throw .invalidParams("timeoutSeconds must be a number of seconds in (0, 3600]", field: "timeoutSeconds")
                }
                return number
            } ?? 300
            let id = try await accounts.waitForOAuthLogin(try params.requiredString("loginID"), timeout: .milliseconds(Int(seconds * 1000)))
            return try await accountReply(id)
        case "accounts.oauth.complete":
            try params.allowOnly(["loginID", "redirectURL"])
            let id = try await accounts.completeOAuthLogin(try params.requiredString("loginID"),
                                                           redirectURL: try params.requiredString("redirectURL"))
            return try await accountReply(id)
        case "accounts.oauth.cancel":
            try params.allowOnly(["loginID"])
            try await accounts.cancelOAuthLogin(try params.requiredString("loginID"))
            return ["cancelled": true]
        default:
            throw .methodNotFound(method)
        }
    }
}
