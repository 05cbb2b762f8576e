import Crypto
import Foundation

/// Seals `AccountSecrets` with AES-GCM-256, bound to one account.
///
/// The additional authenticated data is a purpose/version label plus the
/// account's 16 raw UUID bytes, so a blob copied into another account's row
/// (or reused for another purpose) fails authentication instead of opening.
struct SecretSealer: Sendable {
    /// Leading byte of every sealed blob, so the format can evolve.
    static let formatVersion: UInt8 = 1
    static let purposeLabel = Array("blueskyd/account-secrets/v1".utf8)

    let key: SymmetricKey

    func seal(_ secrets: AccountSecrets, account: UUID) throws -> Data {
        let plaintext: Data
        do {
            plaintext = try JSONEncoder().encode(secrets)
        } catch {
            throw StoreError.secretEncoding(account: account, reason: "\(error)")
        }
        do {
            let box = try AES.GCM.seal(plaintext, using: key, authenticating: Self.additionalData(for: account))
            guard let combined = box.combined else {
                throw StoreError.secretEncoding(account: account, reason: "AES-GCM produced no combined form")
            }
            var blob = Data([Self.formatVersion])
            blob.append(combined)
            return blob
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError.secretEncoding(account: account, reason: "\(error)")
        }
    }

    func open(_ blob: Data, account: UUID) throws -> AccountSecrets {
        guard blob.first == Self.formatVersion else {
            throw StoreError.secretDoesNotOpen(account: account)
        }
        do {
            let box = try AES.GCM.SealedBox(combined: blob.dropFirst())
            let plaintext = try AES.GCM.open(box, using: key, authenticating: Self.additionalData(for: account))
            return try JSONDecoder().decode(AccountSecrets.self, from: plaintext)
        } catch {
            throw StoreError.secretDoesNotOpen(account: account)
        }
    }

    static func additionalData(for account: UUID) -> Data {
        var data = Data(purposeLabel)
        withUnsafeBytes(of: account.uuid) { data.append(contentsOf: $0) }
        return data
    }
}
