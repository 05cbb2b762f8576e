import Foundation
import WebBasics

/// The few claims blueskyd reads from a session token, without verifying it (the PDS does that):
/// only to know when to refresh.
public struct JWTClaims: Sendable, Equatable {
    public var expiresAt: Date?
    public var issuedAt: Date?
    public var subject: String?

    /// Decodes the payload of a compact JWS; nil when `token` is not one.
    public init?(token: String) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = Base64URL.decodeLeniently(parts[1]).map({ Data($0) }),
              let object = try? JSONSerialization.jsonObject(with: payload) as? [String: Any] else { return nil }
        expiresAt = (object["exp"] as? NSNumber).map { Date(timeIntervalSince1970: $0.doubleValue) }
        issuedAt = (object["iat"] as? NSNumber).map { Date(timeIntervalSince1970: $0.doubleValue) }
        subject = object["sub"] as? String
    }
}
