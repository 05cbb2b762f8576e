#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// What bskyctl would otherwise take from Foundation. bskyctl imports only FoundationEssentials:
// full Foundation would link its internationalisation tables too, some 40 MB of a thin client
// that only needs JSON, a socket and its arguments (docs/PERFORMANCE.md, "footprint").

extension StringProtocol {
    /// Without leading and trailing spaces and tabs (Unicode space separators included).
    func trimmingSpaces() -> String {
        trimming { $0 == "\t" || $0.properties.generalCategory == .spaceSeparator }
    }

    /// Without leading and trailing white space, line ends included.
    func trimmingWhitespace() -> String {
        trimming { $0.properties.isWhitespace }
    }

    private func trimming(_ isTrimmed: (Unicode.Scalar) -> Bool) -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !isTrimmed($0) }),
              let last = scalars.lastIndex(where: { !isTrimmed($0) }) else { return "" }
        return String(String.UnicodeScalarView(scalars[first...last]))
    }
}

/// Paths as strings, the way `NSString`'s path methods read them.
enum FilePath {
    /// The last component: "/usr/bin/python3" → "python3", "dir/" → "dir".
    static func lastComponent(_ path: String) -> String {
        let trimmed = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
        guard let slash = trimmed.lastIndex(of: "/") else { return trimmed }
        let name = trimmed[trimmed.index(after: slash)...]
        return name.isEmpty ? trimmed : String(name)
    }

    /// Everything before the last component: "/run/user/1000/blueskyd/rpc.sock" →
    /// "/run/user/1000/blueskyd", "rpc.sock" → "", "/x" → "/".
    static func directory(of path: String) -> String {
        let trimmed = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
        guard let slash = trimmed.lastIndex(of: "/") else { return "" }
        return slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
    }

    /// An absolute path with "." and empty components dropped, ".." taken lexically, and each
    /// symbolic link along it replaced by what it points to, so that two names for one
    /// directory compare equal. `NSString.standardizingPath` did this for links to absolute
    /// paths only; relative ones are followed too. At most 32 links are followed.
    static func standardised(_ path: String) -> String {
        var links = 0
        return standardised(path, links: &links)
    }

    private static func standardised(_ path: String, links: inout Int) -> String {
        guard path.hasPrefix("/") else { return path }
        var resolved = ""
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            switch component {
            case ".":
                continue
            case "..":
                resolved = directory(of: resolved.isEmpty ? "/" : resolved)
                if resolved == "/" { resolved = "" }
            default:
                resolved += "/" + component
                guard links < 32, let target = symbolicLinkTarget(resolved) else { continue }
                links += 1
                let parent = directory(of: resolved)
                resolved = standardised(target.hasPrefix("/") ? target : parent + "/" + target, links: &links)
                if resolved == "/" { resolved = "" }
            }
        }
        return resolved.isEmpty ? "/" : resolved
    }

    /// What the link at `path` points to; nil when `path` is not a symbolic link.
    private static func symbolicLinkTarget(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whether `path` names a directory (following links).
    static func isDirectory(_ path: String) -> Bool {
        var status = stat()
        return stat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFDIR
    }

    /// `text` percent-encoded as one path segment, as Foundation's `urlPathAllowed` without
    /// "/": RFC 3986's unreserved characters, ":", "@" and the sub-delimiters but ";" stay as
    /// they are; "/", "?", "#", "%", ";" and every byte of a character beyond ASCII are encoded.
    static func encodedSegment(_ text: String) -> String {
        var encoded = ""
        for byte in text.utf8 {
            if byte < 0x80, segmentCharacters.contains(Character(Unicode.Scalar(byte))) {
                encoded.append(Character(Unicode.Scalar(byte)))
            } else {
                encoded += "%" + String(byte >> 4, radix: 16, uppercase: true) + String(byte & 0xF, radix: 16, uppercase: true)
            }
        }
        return encoded
    }

    private static let segmentCharacters = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,=:@")
}

/// Standard input, read whole.
enum StandardInput {
    static func readAll() -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
            if count > 0 {
                bytes += chunk[..<count]
            } else if count == 0 || errno != EINTR {
                return bytes
            }
        }
    }
}
