import Foundation
import NIOCore

/// A local AT Protocol network over HTTPS: a PLC directory, handle hosts and one PDS, all on
/// one listener that dispatches on the `Host` header. Counts what it sees so tests can assert
/// on the server's view.
public final class Testbed: Sendable {
    /// The configuration as started (`port` is the bound one).
    public let configuration: TestbedConfiguration
    /// Path of the generated CA certificate (PEM) clients must trust.
    public let caFile: String
    /// The bound port (the configured one, or the ephemeral one picked for port 0).
    public let port: Int
    let context: TestbedContext
    private let channel: any Channel
    private let connections: ConnectionRegistry

    private init(
        configuration: TestbedConfiguration, caFile: String, port: Int, context: TestbedContext,
        channel: any Channel, connections: ConnectionRegistry
    ) {
        self.configuration = configuration
        self.caFile = caFile
        self.port = port
        self.context = context
        self.channel = channel
        self.connections = connections
    }

    /// Generates the CA and server certificate, writes `ca.pem`, and starts listening.
    public static func start(_ configuration: TestbedConfiguration) async throws -> Testbed {
        let certificates = try TestbedCertificates(domain: configuration.domain, bindAddress: configuration.bindAddress)
        let tls = try certificates.makeServerContext()
        let context = TestbedContext(configuration: configuration)
        let connections = ConnectionRegistry()
        let channel: any Channel
        do {
            channel = try await HTTPServer.bind(
                host: configuration.bindAddress,
                port: configuration.port,
                tls: tls,
                maxBodyBytes: configuration.maxRequestBodyBytes,
                router: Router(context: context),
                connections: connections
            )
        } catch {
            throw TestbedError.bindFailed(address: configuration.bindAddress, port: configuration.port, reason: "\(error)")
        }
        let port = channel.localAddress?.port ?? configuration.port
        context.port = port
        let caFile: String
        do {
            caFile = try certificates.writeCA(toDirectory: configuration.directory)
        } catch {
            try? await channel.close()
            throw TestbedError.cannotWriteCA(directory: configuration.directory, reason: "\(error)")
        }
        var bound = configuration
        bound.port = port
        return Testbed(configuration: bound, caFile: caFile, port: port, context: context, channel: channel,
            connections: connections)
    }

    public var plcURL: String { context.plcURL }
    public var pdsURL: String { context.pdsURL }
    /// The PDS's service DID (`aud` of its tokens).
    public var pdsDID: String { context.pdsDID }

    /// Stops listening and drops every open connection.
    public func shutdown() async throws {
        try await channel.close()
        await connections.closeAll()
    }
}

/// Failures starting a testbed, each one line for a user.
public enum TestbedError: Error, CustomStringConvertible {
    case bindFailed(address: String, port: Int, reason: String)
    case cannotWriteCA(directory: String, reason: String)
    case noFreeHermeticSlot

    public var description: String {
        switch self {
        case .bindFailed(let address, let port, let reason):
            "cannot listen on \(address):\(port): \(reason)"
        case .cannotWriteCA(let directory, let reason):
            "cannot write the testbed CA into \(directory): \(reason)"
        case .noFreeHermeticSlot:
            "no free testbed slot: 127.0.0.1-64:443 are all taken (or not in the hermetic network namespace)"
        }
    }

    var isAddressInUse: Bool {
        if case .bindFailed(_, _, let reason) = self { return reason.contains("in use") || reason.contains("EADDRINUSE") }
        return false
    }
}
