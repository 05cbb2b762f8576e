import Foundation

/// Copies every account of one store into another, a page at a time (a million accounts are
/// never held at once), inside the step the target makes whole or not at all.
public enum RegistryCopy {
    /// Accounts read and written per batch.
    public static let pageSize = 500

    /// What the copy would move: refused before anything is written when a row's seal fails.
    public struct Survey: Sendable, Equatable {
        public var accounts: Int
        public var byKind: [AuthKind: Int]
        public var defaultAccount: UUID?
        public var needsLogin: Int
        /// The client keys and nonces, read once: what the copy or export then writes.
        public var extras: RegistryExtras
        public var clientKeys: Int { extras.clientKeys.count }
        public var nonces: Int { extras.nonces.count }
        /// Rows whose seal does not hold, or that cannot be read whole: never copied.
        public var altered: [AccountRecord]
    }

    /// Reads the whole source once (metadata, client keys and nonces; no account's secrets), as
    /// `--dry-run` shows it and as the copy checks it before it writes.
    public static func survey(_ source: any AccountStore) async throws(StoreError) -> Survey {
        var survey = Survey(accounts: 0, byKind: [:], defaultAccount: nil, needsLogin: 0,
                            extras: RegistryExtras(clientKeys: [], nonces: []), altered: [])
        var after: AccountPageKey?
        while true {
            let page = try await source.accounts(after: after, limit: 5_000)
            guard let last = page.last else { break }
            for record in page {
                survey.accounts += 1
                survey.byKind[record.authKind, default: 0] += 1
                if record.isAltered { survey.altered.append(record); continue }
                if record.isDefault { survey.defaultAccount = record.id }
                if record.state == .needsLogin { survey.needsLogin += 1 }
            }
            after = AccountPageKey(createdAt: last.createdAt, id: last.id)
        }
        survey.extras = try await source.registryExtras()
        return survey
    }

    /// Writes every account of `source` into `writer`, then returns how many; `progress` hears
    /// the count after each batch, `sourceFailed` a failure to read the source (told apart from
    /// the target's, which `writer` throws).
    public static func copyAccounts(from source: any AccountStore, into writer: any RegistryWriter,
                                    progress: @Sendable (Int) -> Void = { _ in },
                                    sourceFailed: @Sendable (StoreError) -> Void = { _ in }) async throws(StoreError) -> Int {
        var after: AccountPageKey?
        var copied = 0
        while true {
            let page: [PortableAccount]
            do {
                page = try await source.portableAccounts(after: after, limit: pageSize)
            } catch {
                sourceFailed(error)
                throw error
            }
            guard let last = page.last?.record else { break }
            try await writer.write(page)
            copied += page.count
            progress(copied)
            after = AccountPageKey(createdAt: last.createdAt, id: last.id)
        }
        return copied
    }
}
