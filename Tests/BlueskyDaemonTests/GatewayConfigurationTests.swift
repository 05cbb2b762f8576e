import Foundation
import Testing
@testable import BlueskyDaemon

@Suite("Configuration of the XRPC gateway: its socket and a loopback listener")
struct GatewayConfigurationTests {
    let environment = ["HOME": "/home/u", "XDG_RUNTIME_DIR": "/run/user/1000", "XDG_STATE_HOME": "/home/u/.state"]

    @Test("the gateway's socket sits beside the JSON-RPC socket unless named; \"\" turns it off")
    func socketPath() throws {
        var configuration = DaemonConfiguration(environment: environment)
        #expect(configuration.gatewaySocketPath == "/run/user/1000/blueskyd/xrpc.sock")
        try configuration.apply(toml: "socket = \"/tmp/b/rpc.sock\"\n", file: "f")
        #expect(configuration.gatewaySocketPath == "/tmp/b/xrpc.sock")
        try configuration.apply(toml: "gateway_socket = \"/tmp/g.sock\"\n", file: "f")
        #expect(configuration.gatewaySocketPath == "/tmp/g.sock")
        try configuration.apply(environment: ["BLUESKYD_GATEWAY_SOCKET": ""])
        #expect(configuration.gatewaySocketPath == nil)
    }

    @Test("gateway_listen takes loopback addresses only, naming the key and line otherwise")
    func loopbackOnly() throws {
        #expect(LoopbackAddress("127.0.0.1:9583") == LoopbackAddress(host: "127.0.0.1", port: 9583))
        #expect(LoopbackAddress("127.1.2.3:0") == LoopbackAddress(host: "127.1.2.3", port: 0))
        #expect(LoopbackAddress("[::1]:9583") == LoopbackAddress(host: "::1", port: 9583))
        #expect(LoopbackAddress("localhost:9583") == LoopbackAddress(host: "127.0.0.1", port: 9583))
        for refused in ["0.0.0.0:9583", "192.168.1.2:9583", "[::]:9583", "127.0.0.1", "127.0.0.1:70000", "example.com:80",
                        "127.0.0.1.nip.io:80", "::1:9583", "127.0.0.256:1", ""] {
            #expect(LoopbackAddress(refused) == nil, "\(refused)")
        }
        var configuration = DaemonConfiguration(environment: environment)
        try configuration.apply(toml: "gateway_listen = \"127.0.0.1:9583\"\n", file: "f")
        #expect(configuration.gatewayListen?.description == "127.0.0.1:9583")
        #expect {
            try configuration.apply(toml: "\ngateway_listen = \"0.0.0.0:9583\"\n", file: "/etc/b.toml")
        } throws: { error in
            "\(error)".hasPrefix("/etc/b.toml:2: gateway_listen") && "\(error)".contains("loopback")
        }
        try configuration.apply(toml: "gateway_listen = \"\"\n", file: "f")
        #expect(configuration.gatewayListen == nil)
    }
}
