import ATTestbed
import Foundation

/// The requests the upstream child answers on its standard input, one line each, words
/// separated by spaces; each gets one JSON line back. Bulk data (100,000 sessions, their refresh
/// margins) goes through files named in the request, not through the pipe.
enum UpstreamRequest {
    /// `oauth-counters <did>`: that account's `OAuthCounters`.
    static let oauthCounters = "oauth-counters"
    /// `oauth-totals`: `OAuthTotals` over every request.
    static let oauthTotals = "oauth-totals"
    /// `mint-oauth-sessions <request file> <reply file>`: mints the sessions a `MintRequest`
    /// file asks for, writes the `[MintedOAuthSession]` to the reply file; answers `BulkReply`.
    static let mintOAuthSessions = "mint-oauth-sessions"
    /// `refresh-progress`: `RefreshProgress`, cheap enough to poll every few seconds.
    static let refreshProgress = "refresh-progress"
    /// `refresh-margins <reply file>`: writes `[OAuthRefreshMargin]`; answers `BulkReply`.
    static let refreshMargins = "refresh-margins"
    /// `create-accounts <count> <name prefix>`: `[UpstreamAccount]`, each with its app password.
    static let createAccounts = "create-accounts"
    /// `account-stats <did>`: that app-password account's `AppPasswordCounters`.
    static let accountStats = "account-stats"

    /// The child's reply to one request line: `{"error": …}` for one it cannot answer.
    static func answer(_ request: String, testbed: Testbed) async -> Data {
        let words = request.split(separator: " ").map(String.init)
        do {
            switch (words.first ?? "", words.count) {
            case (oauthCounters, 2):
                return try BulkJSON.encode(OAuthCounters(testbed.oauthStats(did: words[1])))
            case (oauthTotals, 1):
                return try BulkJSON.encode(OAuthTotals(testbed.oauthTotals))
            case (mintOAuthSessions, 3):
                return try mint(requestFile: words[1], replyFile: words[2], testbed: testbed)
            case (refreshProgress, 1):
                return try BulkJSON.encode(RefreshProgress(testbed: testbed))
            case (refreshMargins, 2):
                let margins = testbed.oauthRefreshMargins
                try BulkJSON.encode(margins).write(to: URL(fileURLWithPath: words[1]))
                return try BulkJSON.encode(BulkReply(count: margins.count))
            case (createAccounts, 3):
                guard let count = Int(words[1]), count > 0 else { break }
                var created: [UpstreamAccount] = []
                for index in 0..<count {
                    let account = await testbed.createAccount(AccountSpec(name: "\(words[2])-\(index)", initialPosts: 1))
                    created.append(UpstreamAccount(did: account.did, handle: account.handle, appPassword: account.appPassword))
                }
                return try BulkJSON.encode(created)
            case (accountStats, 2):
                return try BulkJSON.encode(AppPasswordCounters(testbed.stats(did: words[1])))
            default:
                break
            }
            return try BulkJSON.encode(BulkReply(error: "unknown request \(words.first ?? "")"))
        } catch {
            return (try? BulkJSON.encode(BulkReply(error: describe(error)))) ?? Data(#"{"error":"unencodable"}"#.utf8)
        }
    }

    private static func mint(requestFile: String, replyFile: String, testbed: Testbed) throws -> Data {
        let request = try BulkJSON.decode(MintRequest.self, from: Data(contentsOf: URL(fileURLWithPath: requestFile)))
        let minted = try testbed.mintOAuthSessions(request.sessions, clientID: request.clientID, scope: request.scope)
        try BulkJSON.encode(minted).write(to: URL(fileURLWithPath: replyFile))
        return try BulkJSON.encode(BulkReply(count: minted.count))
    }
}

/// The sessions `mint-oauth-sessions` is asked for.
struct MintRequest: Codable, Sendable {
    var clientID: String
    var scope: String
    var sessions: [OAuthSessionMintRequest]
}

/// The short answer to a bulk request: how many items went into the reply file, or why none.
struct BulkReply: Codable, Sendable {
    var count: Int?
    var error: String?
}

/// How far the refreshes of a run have got, from the testbed's margin log.
struct RefreshProgress: Codable, Sendable {
    /// Accounts refreshed at least once.
    var refreshedAccounts: Int
    /// Refreshes that came after the previous access token had expired.
    var lapsed: Int

    init(testbed: Testbed) {
        let margins = testbed.oauthRefreshMargins
        refreshedAccounts = Set(margins.lazy.map(\.did)).count
        lapsed = margins.count { $0.lapsed }
    }
}

/// A testbed account created for the soak (the app password only ever crosses the pipe).
struct UpstreamAccount: Codable, Sendable {
    var did: String
    var handle: String
    var appPassword: String
}

/// One encoding for every file and line between the benchmark and its upstream: dates as
/// seconds since 1970, so that nothing is lost or reformatted on the way.
enum BulkJSON {
    static func encode(_ value: some Encodable) throws -> Data {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        return try encoder.encode(value)
    }

    static func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return try decoder.decode(type, from: data)
    }
}
