import Crypto
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Finds the AES-256 key that seals account secrets.
public enum StoreKey {
    /// Loads the store key.
    ///
    /// 1. When systemd passed a credential (`LoadCredential=`/`SetCredentialEncrypted=`),
    ///    i.e. `$CREDENTIALS_DIRECTORY/<credentialName>` exists, the key comes from it:
    ///    32 raw bytes, 64 hex characters, or base64 of 32 bytes.
    /// 2. Otherwise from `keyFile`, which must be private to the owner (no group/other
    ///    bits). On first start it is created with 32 random bytes, mode 0600; creation
    ///    is atomic, so two processes racing end up with the same key.
    ///
    /// The key itself is never logged; use `keyFingerprint(_:)` to identify it.
    public static func load(
        credentialName: String = "blueskyd-store-key",
        keyFile: URL,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> SymmetricKey {
        if let credentialsDirectory = environment["CREDENTIALS_DIRECTORY"], !credentialsDirectory.isEmpty {
            let credentialPath = URL(fileURLWithPath: credentialsDirectory)
                .appendingPathComponent(credentialName).path
            if FileManager.default.fileExists(atPath: credentialPath) {
                let data: Data
                do {
                    data = try Data(contentsOf: URL(fileURLWithPath: credentialPath))
                } catch {
                    throw StoreError.keyUnavailable(path: credentialPath, reason: error.localizedDescription)
                }
                return try decode(data, path: credentialPath)
            }
        }
        return try loadOrCreateKeyFile(keyFile.path)
    }

    /// Where `load` takes the key from with this environment: the credential when systemd
    /// passed one, else `keyFile`. For messages that must name the file.
    public static func source(credentialName: String = "blueskyd-store-key", keyFile: URL,
                              environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let directory = environment["CREDENTIALS_DIRECTORY"], !directory.isEmpty {
            let credential = URL(fileURLWithPath: directory).appendingPathComponent(credentialName).path
            if FileManager.default.fileExists(atPath: credential) { return credential }
        }
        return keyFile.path
    }

    /// A short, stable identifier of a key for logs: the first 8 bytes of its
    /// SHA-256, in hex. It reveals nothing usable about the key.
    public static func keyFingerprint(_ key: SymmetricKey) -> String {
        let digest = key.withUnsafeBytes { SHA256.hash(data: $0) }
        return digest.prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    // MARK: - Encodings

    /// Accepts 32 raw bytes, 64 hex characters, or base64 of 32 bytes
    /// (text forms may carry surrounding whitespace, e.g. a trailing newline).
    static func decode(_ data: Data, path: String) throws -> SymmetricKey {
        if data.count == 32 {
            return SymmetricKey(data: data)
        }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if text.count == 64, let bytes = hexBytes(text) {
            return SymmetricKey(data: bytes)
        }
        if let bytes = Data(base64Encoded: text), bytes.count == 32 {
            return SymmetricKey(data: bytes)
        }
        throw StoreError.keyInvalid(
            path: path,
            reason: "expected 32 raw bytes, 64 hex characters, or base64 of 32 bytes (got \(data.count) bytes); "
                + "generate one with `openssl rand -hex 32`")
    }

    static func hexBytes(_ text: String) -> Data? {
        var bytes = Data(capacity: text.utf8.count / 2)
        var high: UInt8?
        for character in text.utf8 {
            let nibble: UInt8
            switch character {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = character - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = character - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = character - UInt8(ascii: "A") + 10
            default: return nil
            }
            if let value = high {
                bytes.append(value << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return high == nil ? bytes : nil
    }
}
