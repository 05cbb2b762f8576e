import NIOPosix
#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import Testing
@testable import XRPCGateway

@Suite struct LoopbackPeerOwnerTests {
    /// Two rows of a real /proc/net/tcp: the gateway listening on 127.0.0.1:9583 (uid 1000)
    /// and a client of uid 1001 connected to it from port 51234.
    let table = """
          sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
           0: 0100007F:256F 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 31337 1 0000000000000000 100 0 0 10 0
           1: 0100007F:C822 0100007F:256F 01 00000000:00000000 00:00000000 00000000  1001        0 31338 1 0000000000000000 20 4 30 10 -1
           2: 0100007F:256F 0100007F:C822 01 00000000:00000000 00:00000000 00000000  1000        0 31339 1 0000000000000000 20 4 30 10 -1
        """

    @Test func addressesAreSpelledAsTheKernelSpellsThem() throws {
        #expect(LoopbackPeerOwner.key(try SocketAddress(ipAddress: "127.0.0.1", port: 9583)) == "0100007F:256F")
        #expect(LoopbackPeerOwner.key(try SocketAddress(ipAddress: "127.0.0.1", port: 51234)) == "0100007F:C822")
        #expect(LoopbackPeerOwner.key(try SocketAddress(ipAddress: "::1", port: 9583))
            == "00000000000000000000000001000000:256F")
    }

    @Test func theClientsRowGivesItsUID() {
        // The client's socket: its own address local, ours remote. Not the listener's row nor
        // our side of the connection.
        #expect(LoopbackPeerOwner.uid(in: table, local: "0100007F:C822", remote: "0100007F:256F") == 1001)
        #expect(LoopbackPeerOwner.uid(in: table, local: "0100007F:C823", remote: "0100007F:256F") == nil)
        // A client that connected, wrote and closed at once: its row stays while the kernel
        // finishes the close, held by no process, showing uid 0. Not the root user's.
        let orphaned = table + "   3: 0100007F:C824 0100007F:256F 04 00000000:00000000 01:00000014 00000000     0        0 0 1 0000000000000000 20 4 30 10 -1\n"
        #expect(LoopbackPeerOwner.uid(in: orphaned, local: "0100007F:C824", remote: "0100007F:256F") == nil)
    }

    @Test func aRealConnectionOnThisMachineIsFound() async throws {
        // This process, connected to itself over loopback: the table shows its own uid.
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        let client = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: server.localAddress!.port!).get()
        defer {
            client.close(promise: nil)
            server.close(promise: nil)
        }
        let uid = LoopbackPeerOwner.uid(client: client.localAddress!, server: client.remoteAddress!)
        #expect(uid == getuid())
        // And the process holding the client's socket is this one (what a write's journal line names).
        let socket = try #require(LoopbackPeerOwner.socket(client: client.localAddress!, server: client.remoteAddress!))
        #expect(socket.inode > 0)
        #expect(LoopbackPeerOwner.process(holdingSocket: socket.inode, uid: socket.uid) == getpid())
        #expect(LoopbackPeerOwner.process(holdingSocket: socket.inode &+ 1_000_000_007, uid: socket.uid) == nil)
    }

    @Test func theClientsRowGivesItsInode() {
        #expect(LoopbackPeerOwner.socket(in: table, local: "0100007F:C822", remote: "0100007F:256F")
                == LoopbackClientSocket(uid: 1001, inode: 31338))
    }
}
