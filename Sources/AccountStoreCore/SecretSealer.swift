import Crypto
import Foundation

/// Seals `AccountSecrets` with AES-GCM-256, bound to one account.
///
/// The additional authenticated data is a purpose/version label plus the
/// account's 16 raw UUID bytes, so a blob copied into another account's row
/// (or reused for another purpose) fails authentication instead of opening.
package struct SecretSealer: Sendable {
    /// Leading byte of every sealed blob, so the format can evolve. Version 2 is written by
    /// every blueskyd that seals rows' metadata, and says so under the key: its label is in the
    /// authenticated data, so a blob cannot be passed off as version 1 (which opens under the
    /// other label only). A row whose blob is version 2 had a metadata seal; one found without
    /// it lost it to someone without the key, and is never sealed again (`blueskyd store reseal`
    /// refuses it: log in again).
    static let formatVersion: UInt8 = 2
    package static let legacyFormatVersion: UInt8 = 1
    static let purposeLabel = Array("blueskyd/account-secrets/v2".utf8)
    package static let legacyPurposeLabel = Array("blueskyd/account-secrets/v1".utf8)

    let key: SymmetricKey
    /// The key of the accounts' metadata seals, derived from the store key (never the key itself).
    private let metadataKey: SymmetricKey

    package init(key: SymmetricKey) {
        self.key = key
        metadataKey = HKDF<SHA256>.deriveKey(inputKeyMaterial: key, info: Data("blueskyd/account-metadata/v1".utf8),
                                             outputByteCount: 32)
    }

    /// A MAC under the store key over what decides where an account's tokens are sent: its id
    /// and tenant, how it signs in, its DID, its PDS and its authorization server's issuer and
    /// endpoints. Someone who can write the database but holds no store key cannot rewrite
    /// those without the seal failing (`isSealed`), and the daemon then sends the tokens nowhere.
    package func metadataSeal(_ record: AccountRecord, tenant: String) -> Data {
        Data(HMAC<SHA256>.authenticationCode(for: Self.sealedMetadata(record, tenant: tenant), using: metadataKey))
    }

    /// Whether `seal` is the seal of `record`'s metadata.
    package func isSealed(_ record: AccountRecord, tenant: String, seal: Data?) -> Bool {
        guard let seal else { return false }
        return HMAC<SHA256>.isValidAuthenticationCode(seal, authenticating: Self.sealedMetadata(record, tenant: tenant),
                                                      using: metadataKey)
    }

    /// The sealed fields, each length-prefixed (a missing one as 0xFFFFFFFF), so that no two
    /// different records run together into the same bytes.
    private static func sealedMetadata(_ record: AccountRecord, tenant: String) -> Data {
        // Every row is checked as it loads: one buffer, sized once, no copy per field.
        var data = Data(capacity: 512)
        data.append(contentsOf: "blueskyd/account-metadata/v1".utf8)
        func field(_ value: String?) {
            guard let value else { return data.append(contentsOf: [0xFF, 0xFF, 0xFF, 0xFF]) }
            withUnsafeBytes(of: UInt32(value.utf8.count).bigEndian) { data.append(contentsOf: $0) }
            data.append(contentsOf: value.utf8)
        }
        withUnsafeBytes(of: record.id.uuid) { data.append(contentsOf: $0) }
        field(tenant)
        field(record.authKind.rawValue)
        field(record.did)
        field(record.pds)
        field(record.oauth?.issuer)
        field(record.oauth?.tokenEndpoint)
        field(record.oauth?.revocationEndpoint)
        return data
    }

    package func seal(_ secrets: AccountSecrets, account: UUID) throws(StoreError) -> Data {
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

    package func open(_ blob: Data, account: UUID) throws(StoreError) -> AccountSecrets {
        let label = blob.first == Self.legacyFormatVersion ? Self.legacyPurposeLabel : Self.purposeLabel
        guard let plaintext = open(bytes: blob, additionalData: Self.additionalData(for: account, label: label)),
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
        guard let version = blob.first, version == Self.formatVersion || version == Self.legacyFormatVersion,
              let box = try? AES.GCM.SealedBox(combined: blob.dropFirst()) else {
            return nil
        }
        return try? AES.GCM.open(box, using: key, authenticating: additionalData)
    }

    /// Whether `blob` opens under this key as one written alongside a metadata seal (version 2):
    /// its row had a seal, whatever the row says now.
    package func wasSealedWithMetadata(_ blob: Data, account: UUID) -> Bool {
        blob.first == Self.formatVersion
            && open(bytes: blob, additionalData: Self.additionalData(for: account, label: Self.purposeLabel)) != nil
    }

    package static func additionalData(for account: UUID, label: [UInt8] = purposeLabel) -> Data {
        var data = Data(label)
        withUnsafeBytes(of: account.uuid) { data.append(contentsOf: $0) }
        return data
    }
}
