import ATTestbed
import Foundation

/// Sends `UpstreamRequest` lines to a testbed and decodes the answers: over the child's pipes,
/// or straight to a testbed in this process.
protocol UpstreamControl: Sendable {
    /// One request line; the reply line, nil when the upstream is gone.
    func send(_ request: String) async -> String?
}

extension UpstreamProcess: UpstreamControl {}

/// A testbed running in the benchmark process, answering the same requests as the child.
struct InProcessUpstream: UpstreamControl {
    let testbed: Testbed

    func send(_ request: String) async -> String? {
        String(decoding: await UpstreamRequest.answer(request, testbed: testbed), as: UTF8.self)
    }
}

extension UpstreamControl {
    /// Sends `words` as one request and decodes the reply; an `{"error": …}` reply throws.
    func request<Reply: Decodable>(_ words: [String], as type: Reply.Type) async throws -> Reply {
        let name = words.first ?? ""
        guard let line = await send(words.joined(separator: " ")) else {
            throw BenchError.upstreamFailed("the testbed process is gone (request `\(name)`)")
        }
        let data = Data(line.utf8)
        if let failure = try? BulkJSON.decode(BulkReply.self, from: data), let error = failure.error {
            throw BenchError.upstreamFailed("`\(name)`: \(error)")
        }
        do {
            return try BulkJSON.decode(type, from: data)
        } catch {
            throw BenchError.upstreamFailed("`\(name)` answered something unexpected: \(describe(error))")
        }
    }

    /// Mints sessions at the testbed's authorization server; the files go through `directory`.
    func mintOAuthSessions(_ request: MintRequest, directory: String) async throws -> [MintedOAuthSession] {
        let requestFile = directory + "/mint-request.json"
        let replyFile = directory + "/mint-reply.json"
        defer {
            // The reply holds tokens: not left lying around.
            try? FileManager.default.removeItem(atPath: requestFile)
            try? FileManager.default.removeItem(atPath: replyFile)
        }
        try BulkJSON.encode(request).write(to: URL(fileURLWithPath: requestFile))
        let reply = try await self.request([UpstreamRequest.mintOAuthSessions, requestFile, replyFile], as: BulkReply.self)
        let minted = try BulkJSON.decode([MintedOAuthSession].self, from: Data(contentsOf: URL(fileURLWithPath: replyFile)))
        guard minted.count == request.sessions.count, reply.count == minted.count else {
            throw BenchError.upstreamFailed("asked for \(request.sessions.count) sessions, got \(minted.count)")
        }
        return minted
    }

    /// Every refresh grant's margin so far.
    func refreshMargins(directory: String) async throws -> [OAuthRefreshMargin] {
        let replyFile = directory + "/refresh-margins.json"
        defer { try? FileManager.default.removeItem(atPath: replyFile) }
        _ = try await request([UpstreamRequest.refreshMargins, replyFile], as: BulkReply.self)
        return try BulkJSON.decode([OAuthRefreshMargin].self, from: Data(contentsOf: URL(fileURLWithPath: replyFile)))
    }

    func oauthCounters(did: String) async throws -> OAuthCounters {
        try await request([UpstreamRequest.oauthCounters, did], as: OAuthCounters.self)
    }

    func refreshProgress() async throws -> RefreshProgress {
        try await request([UpstreamRequest.refreshProgress], as: RefreshProgress.self)
    }

    func oauthTotals() async throws -> OAuthTotals {
        try await request([UpstreamRequest.oauthTotals], as: OAuthTotals.self)
    }

    /// `count` new app-password accounts named `<prefix>-<n>`.
    func createAccounts(count: Int, prefix: String) async throws -> [UpstreamAccount] {
        try await request([UpstreamRequest.createAccounts, String(count), prefix], as: [UpstreamAccount].self)
    }

    func appPasswordCounters(did: String) async throws -> AppPasswordCounters {
        try await request([UpstreamRequest.accountStats, did], as: AppPasswordCounters.self)
    }
}
