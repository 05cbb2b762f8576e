import CSystemd
import Foundation

/// The listening socket systemd passed to this process, if any (`sd_listen_fds(3)`).
public enum SocketActivation {
    /// A descriptor passed by the service manager.
    public struct Descriptor: Sendable, Equatable {
        public var fd: Int32
        /// From `FileDescriptorName=` (or the socket unit's name when unset).
        public var name: String
    }

    /// Why the passed descriptors cannot be used; each says so in one line.
    public enum Failure: Error, CustomStringConvertible, Equatable {
        case invalidEnvironment(errno: Int32)
        case ambiguous(names: [String], wanted: String)

        public var description: String {
            switch self {
            case .invalidEnvironment(let code):
                "socket activation: LISTEN_FDS is invalid (\(String(cString: strerror(code))))"
            case .ambiguous(let names, let wanted):
                "socket activation: \(names.count) sockets were passed (\(names.joined(separator: ", "))) and none is named '\(wanted)'"
            }
        }
    }

    /// The descriptors passed to this process (LISTEN_PID must be ours); the variables are
    /// removed so that no child inherits them. Empty outside socket activation.
    ///
    /// Read once and kept: each listener (the JSON-RPC socket, the gateway's) asks, and the
    /// variables are gone after the first read.
    public static func passedDescriptors() throws(Failure) -> [Descriptor] {
        try passed.get()
    }

    private static let passed: Result<[Descriptor], Failure> = Result { () throws(Failure) in try readPassedDescriptors() }

    private static func readPassedDescriptors() throws(Failure) -> [Descriptor] {
        var names: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        let count = sd_listen_fds_with_names(1, &names)
        guard count >= 0 else { throw .invalidEnvironment(errno: -count) }
        defer {
            if let names {
                for index in 0..<Int(count) { free(names[index]) }
                free(names)
            }
        }
        return (0..<count).map { index in
            let name = names?[Int(index)].map { String(cString: $0) } ?? "unknown"
            return Descriptor(fd: SD_LISTEN_FDS_START + index, name: name)
        }
    }

    /// The listening socket named `name` (or `<name>.socket`, what systemd uses when
    /// FileDescriptorName= is unset); else, when `orOnly`, the only one passed unless it bears
    /// one of the names in `others` (the sockets of another of the daemon's listeners).
    public static func listeningSocket(named name: String, orOnly: Bool = true,
                                       others: Set<String> = []) throws(Failure) -> Descriptor? {
        try choose(from: passedDescriptors(), named: name, orOnly: orOnly, others: others)
    }

    static func choose(from passed: [Descriptor], named name: String, orOnly: Bool = true,
                       others: Set<String> = []) throws(Failure) -> Descriptor? {
        if let match = passed.first(where: { $0.name == name || $0.name == name + ".socket" }) { return match }
        let unclaimed = passed.filter { socket in
            !others.contains(socket.name) && !others.contains { socket.name == $0 + ".socket" }
        }
        guard orOnly, !unclaimed.isEmpty else { return nil }
        if unclaimed.count == 1 { return unclaimed[0] }
        throw .ambiguous(names: passed.map(\.name), wanted: name)
    }
}

extension SocketActivation.Descriptor {
    /// True when this is a listening AF_UNIX stream socket, what blueskyd can serve.
    public var isListeningUnixStream: Bool {
        sd_is_socket_unix(fd, Int32(SOCK_STREAM.rawValue), 1, nil, 0) > 0
    }

    /// The path the socket is bound to (getsockname), or nil for an abstract or unnamed socket.
    public var boundPath: String? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let result = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard result == 0, address.sun_family == sa_family_t(AF_UNIX) else { return nil }
        let path = withUnsafeBytes(of: address.sun_path) { bytes in
            String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
        return path.isEmpty ? nil : path
    }
}
