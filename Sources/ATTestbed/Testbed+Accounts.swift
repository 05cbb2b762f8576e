import Foundation

/// Accounts, the test controls (clock, failures, revocation) and the server-side counters.
extension Testbed {
    /// Creates an account (handle `<name>.<domain>`, names must be unique and not `pds`, `pds2`, `plc`, `auth`,
    /// `rogue-auth`, `clients`, `social` or `sso`: those hosts are the testbed's servers).
    public func createAccount(_ spec: AccountSpec) async -> TestAccount {
        let handle = context.handle(forName: spec.name)
        let did = spec.didMethod == .plc ? Identifiers.randomPLC() : context.webDID(forHandle: handle)
        let account = AccountState(did: did, handle: handle, spec: spec)
        context.accounts.add(account)
        for index in 0..<spec.initialPosts {
            _ = context.storeRecord(
                in: account, collection: FeedIndex.postCollection, rkey: nil,
                record: context.post(text: "Post \(index + 1) by \(handle)"))
        }
        return account.testAccount()
    }

    /// Every account, in creation order.
    public var accounts: [TestAccount] { context.accounts.all.map { $0.testAccount() } }

    /// Counters for one account (all zero for an unknown DID).
    public func stats(did: String) -> AccountStats {
        context.accounts.account(did: did)?.stats ?? AccountStats()
    }

    /// XRPC requests seen for an NSID, over all accounts (injected failures included).
    public func requestCount(nsid: String) -> Int { context.metrics.count(nsid: nsid) }

    /// XRPC requests for an NSID that carried an `atproto-proxy` header.
    public func proxiedRequestCount(nsid: String) -> Int { context.metrics.proxiedCount(nsid: nsid) }

    /// The next `count` requests to `nsid` get `status` with an XRPC error body (503 →
    /// `InternalServerError`, 429 → `RateLimitExceeded`, …, or `error`), or an HTML page when
    /// `html`, plus `Retry-After` when given; a 429 also gets `RateLimit-Reset` at that time, as
    /// the reference PDS sends. A new injection for the same NSID replaces the previous one;
    /// `count` 0 clears it.
    public func injectFailures(nsid: String, status: Int, count: Int, retryAfterSeconds: Int? = nil,
                               error: String? = nil, html: Bool = false) {
        context.failures.inject(nsid: nsid, status: status, count: count, retryAfterSeconds: retryAfterSeconds,
                                errorName: error, html: html)
    }

    /// How many of the failures injected for `nsid` have not been served yet.
    public func pendingFailures(nsid: String) -> Int { context.failures.remaining(nsid: nsid) }

    /// Every session of the account ends: its refresh and access tokens stop working.
    public func revokeSessions(did: String) {
        context.accounts.account(did: did)?.data.withLock { $0.revokeAllSessions() }
    }

    /// Changes the account's handle: the DID document's `alsoKnownAs`, the well-known answer at
    /// the new handle host (the old host stops answering) and the PDS's session views.
    public func setHandle(did: String, handle: String) {
        context.accounts.changeHandle(did: did, to: handle)
    }

    /// Moves the account to the PDS's second name (`pdsAliasURL`), or back: its DID document
    /// names the new one, and DPoP-bound calls under the other name are refused with
    /// `invalid_token`, as by a PDS the account has left.
    public func movePDS(did: String, toAlias: Bool = true) {
        context.moves.setMoved(did, toAlias)
    }

    /// Whether `pds2.<domain>` names the rogue issuer as its authorization server (an account
    /// that moves there then cannot keep its session).
    public func setAliasPDSNamesRogueIssuer(_ enabled: Bool) {
        context.moves.aliasNamesRogueIssuer = enabled
    }

    /// The `requestCount(nsid:)` key of fetches of the PDS's protected-resource metadata.
    public static let protectedResourceMetadataKey = PDSService.protectedResourceMetadataKey

    /// `https://pds2.<domain>`: the PDS under its second name.
    public var pdsAliasURL: String { context.pdsAliasURL }

    /// The testbed's notion of now (wall time plus every `advanceClock`).
    public var now: Date { context.clock.now() }

    /// Moves the testbed's clock forward: token `iat`/`exp`, expiry checks, grace periods and
    /// the `Date` header all follow it. TLS certificates stay valid for 400 days of it.
    public func advanceClock(by duration: Duration) {
        context.clock.advance(by: duration)
    }

    /// Zeroes the request counters, every account's stats and OAuth counters, and pending
    /// injected failures.
    public func resetCounters() {
        context.metrics.reset()
        context.oauth.metrics.reset()
        context.oauth.refreshMargins.reset()
        context.failures.reset()
        for account in context.accounts.all {
            account.data.withLock { $0.stats = AccountStats() }
        }
    }

    /// How many records one collection of an account's repo holds.
    public func recordCount(did: String, collection: String) -> Int {
        context.accounts.account(did: did)?.data.withLock { $0.collections[collection]?.count ?? 0 } ?? 0
    }
}
