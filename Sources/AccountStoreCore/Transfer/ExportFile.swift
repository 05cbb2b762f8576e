import Crypto
import Foundation

/// The export file of `blueskyd store export` / `import`: a whole registry, sealed under a key
/// derived from the store key, in parts a reader checks one at a time.
///
/// Layout: a header (`blueskyd-export\n`, the format version, 16 random bytes naming this file,
/// 16 bytes that say which key sealed it), then parts: a kind byte, a length (4 bytes,
/// big-endian) and the part sealed with AES-GCM. Each part's additional data is the header, its
/// index and its kind, so that no part can be changed, dropped, repeated, moved, or taken from
/// another export (even one sealed with the same key); the last part says how many accounts,
/// client keys and nonces came before it, so that a file cut short at a part's boundary is
/// refused too. The client keys come first, then the nonces and the accounts in parts of at most
/// `partSize` (JSON): no part grows with the registry.
///
/// A reader of this format refuses a file of a later format version by name, and a file sealed
/// with another key before reading any part.
public enum ExportFile {
    static let magic = Array("blueskyd-export\n".utf8)
    /// The format this blueskyd writes and reads.
    public static let formatVersion: UInt8 = 1
    static let fileIDLength = 16
    static let keyCheckLength = 16
    public static let headerLength = magic.count + 1 + fileIDLength + keyCheckLength
    /// No part is longer (a length beyond it is damage, not a part to allocate).
    static let maximumPartLength = 64 << 20
    /// Nonces per part (accounts go in parts of `RegistryCopy.pageSize`).
    static let partSize = 10_000

    enum PartKind: UInt8 {
        case clientKeys = 1
        case accounts = 2
        case end = 3
        case nonces = 4
    }

    /// The key that seals exports, derived from the store key for that purpose alone: an
    /// export's parts can never pass for a row's secrets, nor the reverse.
    static func exportKey(_ storeKey: SymmetricKey) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: storeKey, info: Data("blueskyd/export/v1".utf8), outputByteCount: 32)
    }

    /// What the header says of the key: enough to tell "another key" from "damaged".
    static func keyCheck(_ exportKey: SymmetricKey) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: Data("blueskyd/export/key-check".utf8), using: exportKey).prefix(keyCheckLength))
    }

    static func header(_ exportKey: SymmetricKey, fileID: [UInt8]) -> [UInt8] {
        magic + [formatVersion] + fileID + keyCheck(exportKey)
    }

    static func additionalData(header: [UInt8], index: UInt64, kind: PartKind) -> Data {
        var data = Data(header)
        withUnsafeBytes(of: index.bigEndian) { data.append(contentsOf: $0) }
        data.append(kind.rawValue)
        return data
    }

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return encoder
    }()
}

/// Why an export file was refused, whole: nothing of it is imported.
public enum ExportFileError: Error, CustomStringConvertible, Equatable, Sendable {
    case notAnExport(path: String)
    case laterFormat(path: String, version: UInt8)
    case anotherKey(path: String)
    case damaged(path: String, part: UInt64, reason: String)
    case cutShort(path: String)
    case unreadable(path: String, reason: String)
    case exists(path: String)
    case unwritable(path: String, reason: String)

    public var description: String {
        switch self {
        case .notAnExport(let path):
            "\(path) is not a blueskyd export"
        case .laterFormat(let path, let version):
            "\(path) is an export of format \(version), written by a later blueskyd (this one reads format \(ExportFile.formatVersion))"
        case .anotherKey(let path):
            "\(path) was sealed with another store key (or its header is damaged): import it with the key of the store it "
                + "was exported from (--key-file)"
        case .damaged(let path, let part, let reason):
            "\(path) is damaged (part \(part): \(reason)); nothing was imported"
        case .cutShort(let path):
            "\(path) is cut short (its last part is missing); nothing was imported"
        case .unreadable(let path, let reason):
            "cannot read \(path): \(reason)"
        case .exists(let path):
            "\(path) already exists: an export never replaces a file"
        case .unwritable(let path, let reason):
            "cannot write \(path): \(reason)"
        }
    }
}
