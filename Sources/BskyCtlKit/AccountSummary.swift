import FoundationEssentials
import JSONRPC

/// The fields of a protocol `Account` object that bskyctl shows (see docs/PROTOCOL.md).
///
/// Read leniently: a field the daemon leaves out or nulls shows as "-" instead of failing.
public struct AccountSummary: Sendable, Equatable {
    public var id: String
    public var did: String
    public var handle: String
    public var handleVerified: Bool
    public var auth: String
    public var state: String
    public var stateReason: String?
    public var isDefault: Bool
    public var accessExpiresAt: Date?
    public var lastRefreshAt: Date?
    public var nextRefreshAt: Date?
    /// OAuth, public clients: when the session ends for good (a new login is needed then).
    public var sessionEndsAt: Date?
    /// The profile's display name, when the daemon has fetched one.
    public var displayName: String?
    /// The authorization server that granted an OAuth session.
    public var issuer: String?
    /// Set when the account's row has no seal that holds ("unsealed" or "tampered"): nothing
    /// shown of it is to be trusted.
    public var tampered: String?

    public init(json: JSONValue) {
        func text(_ key: String) -> String? { json[key]?.stringValue }
        func date(_ key: String) -> Date? { text(key).flatMap(Timestamp.parse) }
        id = text("id") ?? "-"
        did = text("did") ?? "-"
        handle = text("handle") ?? "-"
        handleVerified = json["handleVerified"]?.boolValue ?? true
        auth = text("auth") ?? "-"
        state = text("state") ?? "-"
        stateReason = text("stateReason")
        isDefault = json["isDefault"]?.boolValue ?? false
        accessExpiresAt = date("accessExpiresAt")
        lastRefreshAt = date("lastRefreshAt")
        nextRefreshAt = date("nextRefreshAt")
        sessionEndsAt = json["oauth"]?["sessionEndsAt"]?.stringValue.flatMap(Timestamp.parse)
        displayName = json["profile"]?["displayName"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 }
        issuer = json["oauth"]?["issuer"]?.stringValue
        tampered = text("tampered")
    }

    /// The handle as people should read it, marked when the daemon could not verify it.
    public var displayHandle: String {
        handleVerified ? handle : "\(handle) (handle unverified)"
    }

    /// "alice.example.com (did:plc:…), account <uuid>", the way commands name an account.
    public var identification: String {
        "\(displayHandle) (\(did)), account \(id)"
    }

    /// The name to suggest in `bskyctl login <name>`: the handle when known, else the DID.
    public var loginName: String {
        handle != "-" && handle != "handle.invalid" ? handle : did
    }

    /// The `bskyctl login` command that signs this account in again the way it was.
    public var loginCommand: String {
        // The row's handle, DID and issuer may be an intruder's: a login built from them
        // would hand the account's password to that server.
        if tampered != nil {
            return "bskyctl login <your own handle> (the record was changed outside blueskyd; do not use what it shows)"
        }
        return switch auth {
        // Another OAuth 2.0 server's account is signed in again at its server (the same
        // person there replaces it in place).
        case "oauth2": "bskyctl login \(issuer ?? loginName)"
        case "oauth": "bskyctl login \(loginName)"
        default: "bskyctl login \(loginName) --app-password"
        }
    }
}

extension AccountSummary {
    /// Reads the `account` field of a method result (`{"account": Account}`).
    static func fromResult(_ result: JSONValue) throws(CtlFailure) -> AccountSummary {
        guard let account = result["account"], account.objectValue != nil else {
            throw CtlFailure.requestFailed("blueskyd's reply has no account object")
        }
        return AccountSummary(json: account)
    }
}
