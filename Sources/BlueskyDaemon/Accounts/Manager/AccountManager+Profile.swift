import BlueskyHTTP
import AccountStoreCore
import Foundation
import JSONRPC
import XRPC

/// Each account's profile, cached for `accounts.list`: a Bluesky account's read from its own
/// PDS (its `app.bsky.actor.profile/self` record), so it is current the moment it is written
/// and needs no AppView; an OAuth 2.0 server's account's from the server's profile endpoint.
/// A failure leaves the cached one and never the account's state.
extension AccountManager {
    /// Fetches the profile again and publishes `account.profileUpdated` when it changed.
    func refreshProfile(of session: AccountSession) async {
        let record = await session.record
        guard let pds = URL(string: record.pds) else { return }
        do {
            let fetched = record.authKind == .oauth2
                ? try await session.fetchOAuth2Profile() : try await fetchProfile(did: record.did, pds: pds)
            guard let profile = fetched else { return }
            await session.adoptProfile(profile)
        } catch {
            logger.notice("could not fetch the account's profile", metadata: [
                "account": "\(record.id.uuidString.lowercased())", "did": "\(record.did)", "reason": "\(error)",
            ])
        }
    }

    /// The same in the background (tracked, a few at a time): a login or a write is not held
    /// up by it. When enough fetches run already this one is skipped; the next login, write or
    /// identity recheck fetches again.
    func refreshProfileSoon(of session: AccountSession) {
        background.start(.profileFetch) { await self.refreshProfile(of: session) }
    }

    private func fetchProfile(did: String, pds: URL) async throws -> AccountProfile {
        let request = XRPCRequest(service: pds, nsid: "com.atproto.repo.getRecord", kind: .query,
                                  parameters: [("repo", .single(did)), ("collection", .single("app.bsky.actor.profile")),
                                               ("rkey", .single("self"))])
        let response = try await environment.http.send(request.outbound(authorization: nil),
                                                       timeout: environment.upstreamTimeout)
        let now = environment.now()
        if response.status == 400, XRPCErrorBody(response: response)?.error == "RecordNotFound" {
            // No profile record: the account simply has none.
            return AccountProfile(displayName: nil, avatar: nil, description: nil, fetchedAt: now)
        }
        guard response.status == 200 else { throw ProfileFetchError("HTTP \(response.status) from \(pds.host ?? "the PDS")") }
        guard let value = try? JSONValue.parse(response.body)["value"]?.objectValue else {
            throw ProfileFetchError("the profile record is not a JSON object")
        }
        return AccountProfile(displayName: Self.text(value["displayName"], limit: 640),
                              avatar: Self.avatarURL(value["avatar"], did: did, pds: pds),
                              description: Self.text(value["description"], limit: 2_560), fetchedAt: now)
    }

    /// A string field, cut to the Lexicon's byte limit (a hostile PDS could send megabytes).
    private static func text(_ value: JSONValue?, limit: Int) -> String? {
        guard let string = value?.stringValue, !string.isEmpty else { return nil }
        guard string.utf8.count > limit else { return string }
        return String(decoding: string.utf8.prefix(limit), as: UTF8.self)
    }

    /// The avatar blob as an https URL of the PDS's `com.atproto.sync.getBlob`.
    private static func avatarURL(_ blob: JSONValue?, did: String, pds: URL) -> String? {
        // A CID is base32 or base58 text: anything else from a hostile PDS is no link.
        guard let cid = blob?["ref"]?["$link"]?.stringValue ?? blob?["cid"]?.stringValue, !cid.isEmpty,
              cid.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) })
        else { return nil }
        var components = URLComponents(url: pds.appendingPathComponent("xrpc/com.atproto.sync.getBlob"),
                                       resolvingAgainstBaseURL: false)
        components?.queryItems = [URLQueryItem(name: "did", value: did), URLQueryItem(name: "cid", value: cid)]
        return components?.url?.absoluteString
    }
}

struct ProfileFetchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

extension XRPCCall {
    /// A write that may have changed the account's profile record (a cheap look: a false
    /// positive costs one fetch).
    var mayWriteProfile: Bool {
        guard Self.repoWrites.contains(nsid), case .json(let bytes)? = body else { return false }
        return bytes.firstRange(of: Array("app.bsky.actor.profile".utf8)) != nil
    }

    private static let repoWrites: Set<String> = [
        "com.atproto.repo.putRecord", "com.atproto.repo.createRecord", "com.atproto.repo.deleteRecord",
        "com.atproto.repo.applyWrites",
    ]
}
