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
    ///
    /// The next page is read while the last one is written: the source's reads (SQLite on its
    /// own queue, or another PostgreSQL connection) and the target's writes overlap, and at most
    /// two pages are held.
    public static func copyAccounts(from source: any AccountStore, into writer: any RegistryWriter,
                                    progress: @Sendable (Int) -> Void = { _ in },
                                    sourceFailed: @Sendable (StoreError) -> Void = { _ in }) async throws(StoreError) -> Int {
        @Sendable func read(after key: AccountPageKey?) async -> Result<[PortableAccount], StoreError> {
            do throws(StoreError) {
                return .success(try await source.portableAccounts(after: key, limit: pageSize))
            } catch {
                return .failure(error)
            }
        }
        func take(_ result: Result<[PortableAccount], StoreError>) throws(StoreError) -> [PortableAccount] {
            switch result {
            case .success(let page): return page
            case .failure(let error):
                sourceFailed(error)
                throw error
            }
        }
        var page = try take(await read(after: nil))
        var copied = 0
        while let last = page.last?.record {
            // Left unawaited when the write throws: the read is cancelled and awaited as the scope ends.
            async let following = read(after: AccountPageKey(createdAt: last.createdAt, id: last.id))
            try await writer.write(page)
            copied += page.count
            progress(copied)
            page = try take(await following)
        }
        return copied
    }
}
