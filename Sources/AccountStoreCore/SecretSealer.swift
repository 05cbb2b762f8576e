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

    /// One store key and the key of the accounts' metadata seals derived from it (never the
    /// store key itself).
    struct Keyed: Sendable {
        let key: SymmetricKey
        let fingerprint: String
        /// An HMAC keyed with the metadata key (derived from the store key, never the store key
        /// itself), copied for each seal: keying one anew hashes the key's pads every time, a
        /// tenth of a start's CPU when every row is checked as it loads.
        let metadataMAC: HMAC<SHA256>

        init(_ key: SymmetricKey) {
            self.key = key
            fingerprint = StoreKey.keyFingerprint(key)
            let metadataKey = HKDF<SHA256>.deriveKey(inputKeyMaterial: key, info: Data("blueskyd/account-metadata/v1".utf8),
                                                     outputByteCount: 32)
            metadataMAC = HMAC<SHA256>(key: metadataKey)
        }

        /// The HMAC-SHA256 of `message` under the metadata key.
        func metadataCode(_ message: [UInt8]) -> HMAC<SHA256>.MAC {
            var mac = metadataMAC
            mac.update(data: message)
            return mac.finalize()
        }
    }

    /// The key everything is sealed with.
    private let writing: Keyed
    /// Every key, the writing one first: the order in which a sealed value is tried. The others
    /// are keys rows may still be sealed with during a rekey while hosts run
    /// (docs/design/rekey.md): opened and checked with, never sealed with. Stored, not built
    /// per call: every row's seal is checked as it loads.
    private let ring: [Keyed]

    var key: SymmetricKey { writing.key }

    package init(key: SymmetricKey) {
        self.init(sealingWith: key, alsoOpening: [])
    }

    /// A key ring: seals with `key`, opens and checks with it or any of `others`.
    package init(sealingWith key: SymmetricKey, alsoOpening others: [SymmetricKey]) {
        writing = Keyed(key)
        var ring = [writing]
        for other in others.map(Keyed.init) where !ring.contains(where: { $0.fingerprint == other.fingerprint }) { ring.append(other) }
        self.ring = ring
    }

    /// The fingerprint (`StoreKey.keyFingerprint`) of the key this ring seals with: what a row
    /// it writes records as `sealed_by`.
    package var writingFingerprint: String { writing.fingerprint }

    /// Every key's fingerprint, the writing one first.
    package var fingerprints: [String] { ring.map(\.fingerprint) }

    /// The same keys, sealing with the one whose fingerprint is `fingerprint`; nil when the ring
    /// does not hold it.
    package func writing(with fingerprint: String) -> SecretSealer? {
        guard let chosen = ring.first(where: { $0.fingerprint == fingerprint }) else { return nil }
        return SecretSealer(writing: chosen, ring: [chosen] + ring.filter { $0.fingerprint != fingerprint })
    }

    private init(writing: Keyed, ring: [Keyed]) {
        self.writing = writing
        self.ring = ring
    }

    /// `blob` sealed again under the writing key, in its own format version (a version 1 blob
    /// stays version 1: a version 2 one would claim a metadata seal its row never had); nil
    /// when no key of the ring opens it. The plaintext is never decoded.
    package func resealed(_ blob: Data, account: UUID) -> Data? {
        let legacy = blob.first == Self.legacyFormatVersion
        let additionalData = Self.additionalData(for: account, label: legacy ? Self.legacyPurposeLabel : Self.purposeLabel)
        guard let plaintext = open(bytes: blob, additionalData: additionalData),
              let combined = try? AES.GCM.seal(plaintext, using: key, authenticating: additionalData).combined else { return nil }
        return Data([legacy ? Self.legacyFormatVersion : Self.formatVersion]) + combined
    }

    /// A metadata seal made again under the writing key, of the same version as `seal`, when
    /// `seal` holds for `record` under a key of the ring; nil otherwise (a broken or missing
    /// seal stays as it is: resealing it would pass off an altered row as the key holder's).
    package func resealedMetadataSeal(_ seal: Data?, record: AccountRecord, tenant: String) -> Data? {
        switch check(record, tenant: tenant, seal: seal) {
        case .holds:
            return metadataSeal(record, tenant: tenant)
        case .olderVersion:
            return Data(writing.metadataCode(Self.sealedMetadata(record, tenant: tenant, version: 1)))
        case .missing, .broken:
            return nil
        }
    }

    /// The fingerprint (`StoreKey.keyFingerprint`) of the key that sealed `blob` for `account`,
    /// among this ring's; nil when none opens it. For counting how many rows each key seals.
    package func sealingKey(of blob: Data, account: UUID) -> String? {
        let label = blob.first == Self.legacyFormatVersion ? Self.legacyPurposeLabel : Self.purposeLabel
        let additionalData = Self.additionalData(for: account, label: label)
        return ring.first { Self.open(bytes: blob, additionalData: additionalData, with: $0.key) != nil }?.fingerprint
    }

    /// A seal under the store key over what decides where an account's tokens go and which
    /// account a name picks: its id and tenant, how it signs in, its DID, its PDS, its
    /// authorization server's issuer and endpoints, its handle and whether that is verified,
    /// whether it is the default, and its OAuth client. Someone who can write the database but
    /// holds no store key cannot rewrite any of them without the seal failing (`check`); the
    /// daemon then sends the tokens nowhere and names the account by no handle and never as
    /// the default. The seal is the version byte then an HMAC-SHA256.
    package func metadataSeal(_ record: AccountRecord, tenant: String) -> Data {
        var seal = Data([Self.metadataSealVersion])
        seal.append(contentsOf: writing.metadataCode(Self.sealedMetadata(record, tenant: tenant)))
        return seal
    }

    /// What `seal` says of `record`: a seal of this version that holds, one an older blueskyd
    /// wrote that holds over what it covered (routing, not the handle or default), none, or
    /// one that does not match.
    package func check(_ record: AccountRecord, tenant: String, seal: Data?) -> MetadataSealCheck {
        guard let seal else { return .missing }
        if seal.count == 33, seal.first == Self.metadataSealVersion {
            // A MAC compared with bytes is compared in constant time (swift-crypto's `==`).
            let sealed = Self.sealedMetadata(record, tenant: tenant)
            return ring.contains { $0.metadataCode(sealed) == seal.dropFirst() } ? .holds : .broken
        }
        if seal.count == 32 {
            let sealed = Self.sealedMetadata(record, tenant: tenant, version: 1)
            if ring.contains(where: { $0.metadataCode(sealed) == seal }) {
                return .olderVersion
            }
        }
        return .broken
    }

    /// The first byte of a metadata seal of this version (an older, 32-byte one has none).
    static let metadataSealVersion: UInt8 = 2

    /// The sealed fields, each length-prefixed (a missing one as 0xFFFFFFFF), so that no two
    /// different records run together into the same bytes. Version 1 (blueskyd before the
    /// handle and default were sealed) stops after the revocation endpoint.
    private static func sealedMetadata(_ record: AccountRecord, tenant: String, version: Int = 2) -> [UInt8] {
        // Every row is checked as it loads: one buffer, sized once, no copy per field (an array:
        // `Data`'s appends were a seventh of a start).
        var data: [UInt8] = []
        data.reserveCapacity(640)
        data.append(contentsOf: version == 1 ? "blueskyd/account-metadata/v1".utf8 : "blueskyd/account-metadata/v2".utf8)
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
        guard version >= 2 else { return data }
        field(record.handle)
        field(record.handleVerified ? "1" : "0")
        field(record.isDefault ? "1" : "0")
        field(record.oauth?.clientKind.rawValue)
        field(record.oauth?.clientID)
        field(record.oauth?.clientKeyID)
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

    /// The plaintext, or nil when the blob is not of this ring's keys and additional data.
    package func open(bytes blob: Data, additionalData: Data) -> Data? {
        for keyed in ring {
            if let plaintext = Self.open(bytes: blob, additionalData: additionalData, with: keyed.key) { return plaintext }
        }
        return nil
    }

    private static func open(bytes blob: Data, additionalData: Data, with key: SymmetricKey) -> Data? {
        guard let version = blob.first, version == formatVersion || version == legacyFormatVersion,
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

/// What a row's metadata seal says of the row (`SecretSealer.check`).
package enum MetadataSealCheck: Sendable, Equatable {
    case holds
    /// A seal an older blueskyd wrote, over the routing fields only: the handle, verified flag
    /// and default flag are the row's word alone. `blueskyd store reseal` may seal it anew.
    case olderVersion
    case missing
    case broken
}
