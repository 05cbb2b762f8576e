import Foundation
import Testing
@testable import SystemdGlue

@Suite("Socket activation and log target choices")
struct ActivationTests {
    typealias Descriptor = SocketActivation.Descriptor

    @Test("the socket named blueskyd (or blueskyd.socket) wins; a lone socket is taken; several unnamed are refused")
    func choosing() throws {
        #expect(try SocketActivation.choose(from: [], named: "blueskyd") == nil)
        let lone = Descriptor(fd: 3, name: "unknown")
        #expect(try SocketActivation.choose(from: [lone], named: "blueskyd") == lone)
        let named = Descriptor(fd: 4, name: "blueskyd")
        #expect(try SocketActivation.choose(from: [lone, named], named: "blueskyd") == named)
        let unitNamed = Descriptor(fd: 5, name: "blueskyd.socket")
        #expect(try SocketActivation.choose(from: [lone, unitNamed], named: "blueskyd") == unitNamed)
        #expect(throws: SocketActivation.Failure.ambiguous(names: ["unknown", "other"], wanted: "blueskyd")) {
            try SocketActivation.choose(from: [lone, Descriptor(fd: 6, name: "other")], named: "blueskyd")
        }
    }

    @Test("the gateway's socket is never taken for the JSON-RPC one, and the gateway takes only its own")
    func gatewaySocket() throws {
        let xrpc = Descriptor(fd: 3, name: "xrpc")
        let main = Descriptor(fd: 4, name: "blueskyd")
        // blueskyd-xrpc.socket alone started the service: the JSON-RPC socket is bound as configured.
        #expect(try SocketActivation.choose(from: [xrpc], named: "blueskyd", others: ["xrpc"]) == nil)
        #expect(try SocketActivation.choose(from: [xrpc, main], named: "blueskyd", others: ["xrpc"]) == main)
        #expect(try SocketActivation.choose(from: [xrpc, main], named: "xrpc", orOnly: false) == xrpc)
        #expect(try SocketActivation.choose(from: [main], named: "xrpc", orOnly: false) == nil)
        let unitNamed = Descriptor(fd: 5, name: "xrpc.socket")
        #expect(try SocketActivation.choose(from: [unitNamed, main], named: "blueskyd", others: ["xrpc"]) == main)
        #expect(try SocketActivation.choose(from: [unitNamed], named: "blueskyd", others: ["xrpc"]) == nil)
    }

    @Test("without LISTEN_FDS nothing was passed")
    func nothingPassed() throws {
        // The test runner is not socket-activated, so LISTEN_PID (if any) is not ours.
        #expect(try SocketActivation.passedDescriptors().isEmpty)
    }

    @Test("auto logs to the journal only when JOURNAL_STREAM names our stderr")
    func journalDetection() {
        var info = stat()
        #expect(fstat(2, &info) == 0)
        let mine = "\(info.st_dev):\(info.st_ino)"
        #expect(LogSetup.resolve(.auto, environment: ["JOURNAL_STREAM": mine]) == .journal)
        #expect(LogSetup.resolve(.auto, environment: ["JOURNAL_STREAM": "\(info.st_dev):\(info.st_ino + 1)"]) == .console,
                "an inherited JOURNAL_STREAM for another stream does not count")
        #expect(LogSetup.resolve(.auto, environment: [:]) == .console)
        #expect(LogSetup.resolve(.journal, environment: [:]) == .journal)
        #expect(LogSetup.resolve(.console, environment: ["JOURNAL_STREAM": mine]) == .console)
    }

    @Test("one shared level governs every handler until a handler is given its own")
    func sharedLevel() {
        let control = LogLevelControl(.info)
        var handler = ConsoleLogHandler(label: "t", level: control)
        #expect(handler.logLevel == .info)
        control.level = .debug
        #expect(handler.logLevel == .debug)
        handler.logLevel = .error
        control.level = .trace
        #expect(handler.logLevel == .error)
    }

    @Test("status lines stay on one line")
    func oneLineStatus() {
        #expect(SystemdNotifier.oneLine("a\nb") == "a b")
    }
}
