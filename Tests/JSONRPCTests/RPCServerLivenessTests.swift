import Foundation
import NIOCore
import NIOPosix
import RPCServer
import Synchronization
import Testing

@Suite("The server's liveness probe, behind blueskyd's watchdog keep-alives")
struct RPCServerLivenessTests {
    @Test("false before listening and after stopping, true while serving")
    func lifecycle() async throws {
        let idle = RPCServer(socketPath: "/nonexistent/rpc.sock", handler: TestHandler(), logger: quietLogger)
        #expect(await idle.probeLiveness() == false)
        let server = try await withServer { running in
            #expect(await running.server.probeLiveness() == true)
            return running.server
        }
        #expect(await server.probeLiveness() == false)
    }

    @Test("a wedged event loop holds the probe until it is free again")
    func wedgedLoop() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var configuration = RPCServer.Configuration()
        configuration.eventLoopGroup = group
        try await withServer(configuration: configuration) { running in
            let release = DispatchSemaphore(value: 0)
            group.next().execute { release.wait() }  // the loop is stuck in a handler
            let answered = Atomic(false)
            let probe = Task {
                let alive = await running.server.probeLiveness()
                answered.store(true, ordering: .sequentiallyConsistent)
                return alive
            }
            try await Task.sleep(for: .milliseconds(300))
            let answeredWhileStuck = answered.load(ordering: .sequentiallyConsistent)
            #expect(!answeredWhileStuck, "no answer while the loop is stuck")
            release.signal()
            #expect(await probe.value == true, "the loop answers once free")
        }
        try await group.shutdownGracefully()
    }
}
