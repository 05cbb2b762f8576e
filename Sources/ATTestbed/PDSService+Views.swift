import Foundation
import JSONRPC

/// The app view methods a client calls through its PDS, answered from the testbed's own data.
extension PDSService {
    static let profileCollection = "app.bsky.actor.profile"

    func resolveHandle(_ request: TestbedRequest) throws(XRPCError) -> TestbedResponse {
        let handle = try requiredParameter("handle", request).lowercased()
        guard let account = context.accounts.account(handle: handle) else {
            throw .invalidRequest("Unable to resolve handle")
        }
        return .json(["did": .string(account.did)])
    }

    func getProfile(_ request: TestbedRequest) throws(XRPCError) -> TestbedResponse {
        _ = try authenticateAccess(request)
        let actor = try requiredParameter("actor", request)
        guard let account = context.accounts.account(identifier: actor.hasPrefix("did:") ? actor : actor.lowercased())
        else {
            throw .invalidRequest("Profile not found")
        }
        let (handle, profile, postsCount) = account.data.withLock { data in
            (
                data.handle,
                data.collections[Self.profileCollection]?.records["self"]?.value,
                data.collections[FeedIndex.postCollection]?.count ?? 0
            )
        }
        var body: [String: JSONValue] = [
            "did": .string(account.did),
            "handle": .string(handle),
            "displayName": profile?["displayName"] ?? .string(account.name.capitalized),
            "followersCount": 0,
            "followsCount": 0,
            "postsCount": .number(Double(postsCount)),
            "labels": [],
        ]
        if let description = profile?["description"] { body["description"] = description }
        return .json(.object(body))
    }

    /// Every account's posts, newest first; `cursor` pages back in time and is absent at the end.
    func getTimeline(_ request: TestbedRequest) throws(XRPCError) -> TestbedResponse {
        _ = try authenticateAccess(request)
        let limit = try limitParameter(request)
        let cursor = request.query["cursor"].flatMap { $0.isEmpty ? nil : $0 }
        let page = context.feed.page(limit: limit, cursor: cursor)
        let items: [JSONValue] = page.entries.map { entry in
            let author = context.accounts.account(did: entry.did)
            let post: JSONValue = [
                "uri": .string(entry.uri),
                "cid": .string(entry.cid),
                "author": [
                    "did": .string(entry.did),
                    "handle": .string(author?.handle ?? "handle.invalid"),
                    "displayName": .string(author?.name.capitalized ?? ""),
                ],
                "record": entry.value,
                "replyCount": 0,
                "repostCount": 0,
                "likeCount": 0,
                "quoteCount": 0,
                "indexedAt": entry.value["createdAt"] ?? .string(HTTPDate.iso8601(context.clock.now())),
                "labels": [],
            ]
            return ["post": post]
        }
        var body: [String: JSONValue] = ["feed": .array(items)]
        if let next = page.cursor { body["cursor"] = .string(next) }
        return .json(.object(body))
    }
}
