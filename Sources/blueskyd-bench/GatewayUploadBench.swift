import DaemonHarness
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// A 100 MB blob uploaded through the XRPC gateway: how long it took, and how much the
/// daemon's resident memory grew meanwhile (the body is passed on as it arrives, never held).
struct GatewayUploadResult: Codable, Sendable {
    /// The daemon's resident memory may grow by at most this much (16 MiB, in KiB).
    static let targetGrowthKiB = 16 * 1024

    var bytes: Int
    var seconds: Double
    var status: Int
    var rssBeforeKiB: Int
    /// VmHWM after the upload, the peak having been reset just before it.
    var peakDuringKiB: Int
    var growthKiB: Int { peakDuringKiB - rssBeforeKiB }
    var meetsTarget: Bool { status == 200 && growthKiB <= Self.targetGrowthKiB }
}

enum GatewayUpload {
    static let section = "gateway-upload"

    /// Uploads `bytes` bytes (64 KiB chunks, each flushed before the next) for `did` through the
    /// gateway at `socketPath`, with the daemon `pid`'s memory read around it.
    static func measure(socketPath: String, did: String, bytes: Int, pid: Int32, group: any EventLoopGroup) async throws
        -> GatewayUploadResult
    {
        let answer = group.next().makePromise(of: (Int, String).self)
        let channel = try await ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(UploadAnswerHandler(answer: answer))
                }
            }
            .connect(unixDomainSocketPath: socketPath).get()
        defer { channel.close(promise: nil) }
        // Resets VmHWM to the current RSS (Linux, clear_refs 5), so the peak read after is the upload's.
        try? "5".write(toFile: "/proc/\(pid)/clear_refs", atomically: false, encoding: .ascii)
        let before = ProcessMemory.read(pid: pid)?.rssKiB ?? 0
        let started = ContinuousClock.now
        let headers = HTTPHeaders([("Host", "localhost"), ("atproto-account", did), ("Content-Type", "image/png"),
                                   ("Content-Length", String(bytes))])
        channel.write(HTTPClientRequestPart.head(HTTPRequestHead(version: .http1_1, method: .POST,
                                                                 uri: "/xrpc/com.atproto.repo.uploadBlob", headers: headers)),
                      promise: nil)
        let chunk = ByteBuffer(repeating: 0xA5, count: 64 * 1024)
        var sent = 0
        while sent < bytes {
            let length = min(chunk.readableBytes, bytes - sent)
            try await channel.writeAndFlush(HTTPClientRequestPart.body(.byteBuffer(chunk.getSlice(at: 0, length: length)!))).get()
            sent += length
        }
        try await channel.writeAndFlush(HTTPClientRequestPart.end(nil)).get()
        let (status, body) = try await answer.futureResult.get()
        let seconds = (ContinuousClock.now - started).inSeconds
        guard status == 200 else { throw BenchError.unexpectedReply("uploadBlob through the gateway: \(status) \(body.prefix(300))") }
        let peak = ProcessMemory.read(pid: pid)?.peakKiB ?? 0
        return GatewayUploadResult(bytes: bytes, seconds: seconds, status: status, rssBeforeKiB: before, peakDuringKiB: peak)
    }
}

/// Collects one answer's status and body.
private final class UploadAnswerHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let answer: EventLoopPromise<(Int, String)>
    private var status = 0
    private var body = ""
    private var answered = false

    init(answer: EventLoopPromise<(Int, String)>) {
        self.answer = answer
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): status = Int(head.status.code)
        case .body(let chunk): body += String(buffer: chunk)
        case .end:
            guard !answered else { return }
            answered = true
            answer.succeed((status, body))
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(ChannelError.eof)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(error)
        context.close(promise: nil)
    }

    private func fail(_ error: any Error) {
        guard !answered else { return }
        answered = true
        answer.fail(error)
    }
}
