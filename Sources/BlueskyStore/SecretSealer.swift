import Crypto
import Foundation

/// Seals `AccountSecrets` with AES-GCM-256, bound to one account.
///
/// The additional authenticated data is a purpose/version label plus the
/// account's 16 raw UUID bytes, so a blob copied into another account's row
/// (or reused for another purpose) fails authentication instead of opening.
package struct SecretSealer: Sendable {
    /// Leading byte of every sealed blob, so the format can evolve.
    static let formatVersion: UInt8 = 1
    static let purposeLabel = Array("blueskyd/account-secrets/v1".utf8)

    let key: SymmetricKey

    package init(key: SymmetricKey) { self.key = key }

    package func seal(_ secrets: AccountSecrets, account: UUID) throws -> Data {
        let plaintext: Data
        do {
            plaintext = try JSONEncoder().encode(secrets)
        } catch {
            throw StoreError.secretEncoding(account: account, reason: "\(error)")
        }
        guard let blob = seal(bytes: plaintext, additionalData: Self.additionalData(for: account)) else {
            throw StoreError.secretEncoding(account: account, reason: "AES-GCM failed")
        }
        return blob
    }

    package func open(_ blob: Data, account: UUID) throws -> AccountSecrets {
        guard let plaintext = open(bytes: blob, additionalData: Self.additionalData(for: account)),
              let secrets = try? JSONDecoder().decode(AccountSecrets.self, from: plaintext) else {
            throw StoreError.secretDoesNotOpen(account: account)
        }
        return secrets
    }

    /// The version byte, then AES-GCM's nonce, ciphertext and tag; nil if AES-GCM fails.
    package func seal(bytes plaintext: Data, additionalData: Data) -> Data? {
        guard let combined = try? AES.GCM.seal(plaintext, using: key, authenticating: additionalData).combined else {
            return nil
        }
        var blob = Data([Self.formatVersion])
        blob.append(combined)
        return blob
    }

    /// The plaintext, or nil when the blob is not of this key and additional data.
    package func open(bytes blob: Data, additionalData: Data) -> Data? {
        guard blob.first == Self.formatVersion, let box = try? AES.GCM.SealedBox(combined: blob.dropFirst()) else {
            return nil
        }
        return try? AES.GCM.open(box, using: key, authenticating: additionalData)
    }

    static func additionalData(for account: UUID) -> Data {
        var data = Data(purposeLabel)
        withUnsafeBytes(of: account.uuid) { data.append(contentsOf: $0) }
        return data
    }
}
