import Foundation
import RPCServer
import SystemdGlue

/// Where the daemon serves: a socket systemd passed, or one it binds itself.
struct DaemonListener {
    var listener: RPCServer.Listener
    /// The socket's path, for daemon.info and the logs.
    var path: String
    /// True when systemd passed the socket (blueskyd.socket).
    var activated: Bool
}

/// Why the socket systemd passed cannot be used, in one line.
struct ListenerError: Error, CustomStringConvertible {
    var description: String
}

extension Daemon {
    /// The socket named "blueskyd" (FileDescriptorName= in blueskyd.socket) or the only one
    /// passed by socket activation; otherwise the configured path, bound by the server.
    func socketListener() throws -> DaemonListener {
        let passed: SocketActivation.Descriptor?
        do {
            passed = try SocketActivation.listeningSocket(named: "blueskyd", others: otherSocketNames)
        } catch {
            throw ListenerError(description: error.description)
        }
        guard let passed else {
            return DaemonListener(listener: .path(configuration.socketPath), path: configuration.socketPath,
                                  activated: false)
        }
        guard passed.isListeningUnixStream else {
            throw ListenerError(description: """
                socket activation: descriptor \(passed.fd) ('\(passed.name)') is not a listening Unix stream socket; \
                use ListenStream= with a path in the .socket unit
                """)
        }
        let path = passed.boundPath ?? "(inherited descriptor \(passed.fd))"
        if path != configuration.socketPath {
            logger.notice("serving the socket systemd passed, not the configured path", metadata: [
                "socket": "\(path)", "configuredSocket": "\(configuration.socketPath)",
            ])
        }
        return DaemonListener(listener: .inheritedDescriptor(passed.fd), path: path, activated: true)
    }

    /// FileDescriptorName= of blueskyd-xrpc.socket.
    static let gatewaySocketName = "xrpc"

    /// The names of the sockets systemd may pass besides the main one: the gateway's and each
    /// `[[client]]`'s.
    var otherSocketNames: Set<String> {
        Set([Self.gatewaySocketName] + configuration.clients.flatMap { [$0.name, $0.gatewayDescriptorName] })
    }

    /// A `[[client]]` socket: the one systemd passed under `name`, or `path` bound by the server;
    /// nil when the client has no such socket.
    func clientListener(named name: String, path: String?) throws -> DaemonListener? {
        let passed: SocketActivation.Descriptor?
        do {
            passed = try SocketActivation.listeningSocket(named: name, orOnly: false)
        } catch {
            throw ListenerError(description: error.description)
        }
        guard let passed else { return path.map { DaemonListener(listener: .path($0), path: $0, activated: false) } }
        guard passed.isListeningUnixStream else {
            throw ListenerError(description: """
                socket activation: descriptor \(passed.fd) ('\(passed.name)') is not a listening Unix stream socket; \
                use ListenStream= with a path in its .socket unit
                """)
        }
        return DaemonListener(listener: .inheritedDescriptor(passed.fd),
                              path: passed.boundPath ?? "(inherited descriptor \(passed.fd))", activated: true)
    }
    /// The socket named "xrpc" that systemd passed, or the configured gateway path; nil when
    /// the gateway is off (and systemd passed it no socket).
    func gatewayListener() throws -> DaemonListener? {
        let passed: SocketActivation.Descriptor?
        do {
            passed = try SocketActivation.listeningSocket(named: Self.gatewaySocketName, orOnly: false)
        } catch {
            throw ListenerError(description: error.description)
        }
        guard let passed else {
            guard let path = configuration.gatewaySocketPath else { return nil }
            return DaemonListener(listener: .path(path), path: path, activated: false)
        }
        guard passed.isListeningUnixStream else {
            throw ListenerError(description: """
                socket activation: descriptor \(passed.fd) ('\(passed.name)') is not a listening Unix stream socket; \
                use ListenStream= with a path in blueskyd-xrpc.socket
                """)
        }
        return DaemonListener(listener: .inheritedDescriptor(passed.fd),
                              path: passed.boundPath ?? "(inherited descriptor \(passed.fd))", activated: true)
    }
}
