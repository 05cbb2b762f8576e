import ATTestbed
import DaemonHarness
import DPoP
import Foundation

/// Registers OAuth accounts by writing a SQLite daemon's store directly
/// (`SeededOAuthAccounts` makes each record), sealed with the store key.
enum OAuthFakeAccounts {
    /// Writes one account per minted session into `<stateDirectory>` (see `FakeAccounts.write`);
    /// `issuedAt` as `SeededOAuthAccounts.account` says.
    static func seed(stateDirectory: String, sessions: [MintedOAuthSession], keys: [DPoPKey], issuer: String,
                     pdsURL: String, issuedAt: (MintedOAuthSession) -> Date) async throws {
        precondition(sessions.count == keys.count)
        try await FakeAccounts.write(stateDirectory: stateDirectory, count: sessions.count) { index in
            SeededOAuthAccounts.account(sessions[index], key: keys[index], isDefault: index == 0, issuer: issuer,
                                        pdsURL: pdsURL, issuedAt: issuedAt(sessions[index]))
        }
    }
}
