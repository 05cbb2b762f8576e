import Crypto
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension StoreKey {
    /// Reads the key file, creating it on first start.
    static func loadOrCreateKeyFile(_ path: String) throws -> SymmetricKey {
        // A racing process may create the file between our failed read and our
        // link; the second read then finds the winner's key.
        for _ in 0..<2 {
            if let key = try readKeyFile(path) {
                return key
            }
            if try createKeyFile(path) {
                break
            }
        }
        guard let key = try readKeyFile(path) else {
            throw StoreError.keyUnavailable(path: path, reason: "the key file vanished while being created")
        }
        return key
    }

    /// The key in `path`, or nil when the file does not exist.
    static func readKeyFile(_ path: String) throws -> SymmetricKey? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw StoreError.keyUnavailable(path: path, reason: errnoDescription())
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw StoreError.keyUnavailable(path: path, reason: errnoDescription())
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw StoreError.keyInvalid(path: path, reason: "not a regular file")
        }
        let mode = UInt32(info.st_mode) & 0o7777
        guard mode & 0o077 == 0 else {
            throw StoreError.keyFileInsecure(path: path, mode: mode)
        }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 256)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw StoreError.keyUnavailable(path: path, reason: errnoDescription())
            }
            if count == 0 { break }
            data.append(contentsOf: buffer[0..<count])
            if data.count > 4096 {
                throw StoreError.keyInvalid(path: path, reason: "file too large for a key")
            }
        }
        _ = buffer.withUnsafeMutableBytes { $0.initializeMemory(as: UInt8.self, repeating: 0) }
        return try decode(data, path: path)
    }

    /// Writes 32 random bytes to a private temporary file (O_EXCL, 0600, fsynced),
    /// then publishes it with link(2), which fails if the key file already exists.
    /// Readers therefore never see a partly written key, and two racing processes
    /// cannot end up with different keys.
    /// - Returns: false when another process created the key file first.
    static func createKeyFile(_ path: String, key: SymmetricKey = SymmetricKey(size: .bits256)) throws -> Bool {
        let directory = PrivateFiles.directory(of: path)
        if !FileManager.default.fileExists(atPath: directory) {
            try PrivateFiles.ensureDirectory(directory)
        }
        let temporaryPath: String
        do {
            temporaryPath = try key.withUnsafeBytes { try PrivateFiles.writeTemporary(beside: path, $0) }
        } catch {
            throw StoreError.keyUnavailable(path: path, reason: "a new key: \(error)")
        }
        defer { unlink(temporaryPath) }
        guard link(temporaryPath, path) == 0 else {
            if errno == EEXIST { return false }
            throw StoreError.keyUnavailable(path: path, reason: "publishing a new key: \(errnoDescription())")
        }
        PrivateFiles.syncDirectory(directory)
        return true
    }

    /// Whether `key` could be random: 32 random bytes hold fewer than 16 distinct values with a
    /// chance below 10^-20, so a key that does (all zeros, a pattern) is one somebody chose.
    public static func distinctBytes(_ key: SymmetricKey) -> Int {
        key.withUnsafeBytes { Set($0).count }
    }

    /// The credential of an installed second key (`StateDirectory.newKeyFile`).
    public static let newKeyCredential = "blueskyd-store-key-new"

    /// The installed second key: systemd's credential `blueskyd-store-key-new` when passed,
    /// else `newKeyFile` when it exists; nil when neither is there.
    public static func installedNewKey(newKeyFile: URL,
                                       environment: [String: String] = ProcessInfo.processInfo.environment) throws -> SymmetricKey? {
        if let directory = environment["CREDENTIALS_DIRECTORY"], !directory.isEmpty {
            let credential = URL(fileURLWithPath: directory).appendingPathComponent(newKeyCredential)
            if FileManager.default.fileExists(atPath: credential.path) {
                return try load(credentialName: newKeyCredential, keyFile: credential, environment: environment)
            }
        }
        return try readKeyFile(newKeyFile.path)
    }

    /// The key in `keyFile` (checked private like any key file), or nil when there is none.
    public static func existing(keyFile: URL) throws -> SymmetricKey? {
        try readKeyFile(keyFile.path)
    }

    /// Writes `key` to `keyFile` (private, atomically, never over an existing file): a copy
    /// into a new state directory leaves the key that opens it there. False when a key file
    /// is already there.
    public static func install(_ key: SymmetricKey, keyFile: URL) throws -> Bool {
        try createKeyFile(keyFile.path, key: key)
    }
}
