import BlueskyHTTP
import Foundation
import NIOCore
import Synchronization
import Testing

/// An upload streamed through `OutboundHTTP.stream` ends with its exchange: a server that
/// answers early, or is cut off, while it reads none of the upload leaves no writer waiting.
/// (async-http-client keeps a write made while the connection is not writable until it is, and
/// drops it unanswered when the exchange ends first: the upload's reader waited for ever, holding
/// the client's request.)
@Suite("OutboundHTTP.stream: an upload ends with its exchange")
struct StreamedUploadTests {
    /// An endless upload whose reader says when it is let go of.
    final class Upload: Sendable {
        let chunksRead = Atomic(0)
        let released = Atomic(false)

        func source() -> ChunkSource {
            let guardian = Guardian(self)
            return ChunkSource(length: nil) {
                _ = guardian
                self.chunksRead.add(1, ordering: .relaxed)
                return ByteBuffer(repeating: 0x61, count: 64 * 1024)
            }
        }
    }

    /// Marks its upload released when the last reference to the source's reader goes.
    final class Guardian: Sendable {
        let upload: Upload
        init(_ upload: Upload) { self.upload = upload }
        deinit { upload.released.store(true, ordering: .relaxed) }
    }

    private static func released(_ upload: Upload, within limit: Duration) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if upload.released.load(ordering: .relaxed) { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return upload.released.load(ordering: .relaxed)
    }

    @Test("a 413 once the upload waits, from a server that reads nothing more: the answer comes, and the upload is let go")
    func refusedEarly() async throws {
        let server = try await ScriptedHTTPServer.start()
        let http = try OutboundHTTP(.init(policy: HTTPPolicy(allowInsecureLoopback: true)))
        let upload = Upload()
        let request = OutboundRequest(method: "POST", url: URL(string: "http://127.0.0.1:\(server.port)/refuse-unread")!)
        let answer = try await http.stream(request, upload: upload.source(), timeout: .seconds(10))
        let whole = try await answer.collected(upTo: 1024, timeout: .seconds(10))
        #expect(whole.status == 413 && String(decoding: whole.body, as: UTF8.self) == "too large")
        #expect(await Self.released(upload, within: .seconds(10)),
                "the upload's reader still waits after \(upload.chunksRead.load(ordering: .relaxed)) chunks")
        _ = await server.closeHeld()
        try await http.shutdown()
        await server.stop()
    }

    @Test("a server that neither answers nor reads: cut off at the deadline, and the upload is let go")
    func stalled() async throws {
        let server = try await ScriptedHTTPServer.start()
        let http = try OutboundHTTP(.init(policy: HTTPPolicy(allowInsecureLoopback: true)))
        let upload = Upload()
        let url = URL(string: "http://127.0.0.1:\(server.port)/stall-unread")!
        await #expect(throws: HTTPError.timedOut(url.absoluteString)) {
            _ = try await http.stream(OutboundRequest(method: "POST", url: url), upload: upload.source(), timeout: .milliseconds(500))
        }
        #expect(await Self.released(upload, within: .seconds(10)),
                "the upload's reader still waits after \(upload.chunksRead.load(ordering: .relaxed)) chunks")
        _ = await server.closeHeld()
        try await http.shutdown()
        await server.stop()
    }
}
