import NIOCore
import NIOPosix

/// One HTTP/1.1 exchange over a Unix socket, as raw text: for tests where running curl is
/// not possible (a child process started by a launcher the test also started).
public enum RawHTTPExchange {
    /// Sends `request` (its own `Connection: close` included) and returns everything the
    /// server wrote until it closed the connection.
    public static func exchange(socketPath: String, _ request: String) async throws -> String {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(unixDomainSocketPath: socketPath) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            try await outbound.write(ByteBuffer(string: request))
            var received = ""
            for try await chunk in inbound { received += String(buffer: chunk) }
            return received
        }
    }

    /// `GET path` with `Host: localhost`.
    public static func get(socketPath: String, _ path: String) async throws -> String {
        try await exchange(socketPath: socketPath, "GET \(path) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    }
}
