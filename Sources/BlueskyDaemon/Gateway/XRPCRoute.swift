import ATSyntax
import BlueskyHTTP
import Foundation
import NIOCore
import NIOHTTP1
import WebBasics
import XRPC
import XRPCGateway

/// What a gateway request asks for: an XRPC call (`/xrpc/<nsid>`) for one account, or the
/// gateway's own health check.
enum XRPCRoute {
    /// A call; a large body (or one of unknown length) comes as `upload`, passed on as it is read.
    case call(XRPCCall, upload: Upload?)
    /// `GET /xrpc/_health`, answered by blueskyd itself (as a PDS answers it).
    case health
    /// Not a call the gateway makes: the answer saying why.
    case refused(GatewayResponse)

    /// A request body passed on as it arrives, with its media type.
    struct Upload {
        var chunks: ChunkSource
        var contentType: String
    }

    /// The route of `request`.
    static func of(_ request: GatewayRequest) -> XRPCRoute {
        let path = request.path
        guard path.hasPrefix("/xrpc/") else {
            return .refused(.xrpcError(.notFound, GatewayErrorName.notFound.rawValue,
                                       "only /xrpc/<nsid> is served here, not \(String(path.prefix(200)))"))
        }
        let written = String(path.dropFirst("/xrpc/".count))
        if written == "_health", request.method == .GET || request.method == .HEAD { return .health }
        guard NSID(written) != nil else {
            return .refused(.xrpcError(.badRequest, "InvalidRequest", "'\(written.prefix(200))' is not a valid NSID"))
        }
        let kind: XRPCMethodKind
        switch request.method {
        case .GET, .HEAD: kind = .query
        case .POST: kind = .procedure
        default:
            return .refused(.xrpcError(.methodNotAllowed, GatewayErrorName.methodNotSupported.rawValue,
                                       "XRPC takes GET (queries) and POST (procedures), not \(request.method.rawValue)",
                                       headers: [("Allow", "GET, HEAD, POST")]))
        }
        // The policy and the PDS see one spelling: the Lexicons'.
        let nsid: String
        switch XRPCCall.canonical(written, kind: kind) {
        case .success(let canonical): nsid = canonical
        case .failure(let refusal): return .refused(refusal.gatewayResponse)
        }
        let headers = request.headers
        let proxy = headers.first(name: "atproto-proxy")
        if let proxy, !XRPCCall.isServiceReference(proxy) {
            return .refused(.xrpcError(.badRequest, "InvalidRequest",
                                       "atproto-proxy must look like did:web:api.bsky.chat#bsky_chat"))
        }
        let labelers = headers.first(name: "atproto-accept-labelers")
        if let labelers, !XRPCCall.isHeaderSafe(labelers) {
            return .refused(.xrpcError(.badRequest, "InvalidRequest", "atproto-accept-labelers holds characters a header cannot"))
        }
        let type = headers.first(name: "content-type") ?? "application/octet-stream"
        guard XRPCCall.isHeaderSafe(type) else {
            return .refused(.xrpcError(.badRequest, "InvalidRequest", "content-type holds characters a header cannot"))
        }
        var body: XRPCBody?
        var upload: Upload?
        switch request.body {
        case .whole(let bytes) where bytes.readableBytes > 0 && kind == .procedure:
            let array = Array(bytes.readableBytesView)
            body = Self.isJSON(type) ? .json(array) : .bytes(array, contentType: type)
        case .whole:
            break
        case .streamed(let chunks):
            guard kind == .procedure else {
                return .refused(.xrpcError(.badRequest, "InvalidRequest", "\(nsid) is a query and takes no input"))
            }
            upload = Upload(chunks: chunks, contentType: type)
        }
        let parameters = request.query.map(Self.parameters) ?? []
        if let refusal = XRPCCall.ambiguity(nsid: nsid, parameters: parameters) { return .refused(refusal.gatewayResponse) }
        let call = XRPCCall(nsid: nsid, account: headers.first(name: "atproto-account"), kind: kind,
                            parameters: parameters, body: body, atprotoProxy: proxy, acceptLabelers: labelers)
        return .call(call, upload: upload)
    }

    /// `application/json`, with or without parameters (`; charset=utf-8`).
    static func isJSON(_ contentType: String) -> Bool {
        let media = contentType.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces) }
        return media?.lowercased() == "application/json"
    }

    /// A query string's pairs, percent-decoded (`+` is a space, as form encoding and every
    /// SDK's encoder mean it); a repeated name becomes a list, in the order given.
    static func parameters(_ query: Substring) -> [(String, XRPCParameter)] {
        var order: [String] = []
        var values: [String: [String]] = [:]
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = decode(parts[0])
            let value = parts.count > 1 ? decode(parts[1]) : ""
            guard !name.isEmpty else { continue }
            if values[name] == nil { order.append(name) }
            values[name, default: []].append(value)
        }
        return order.map { name in
            let list = values[name] ?? []
            return (name, list.count == 1 ? .single(list[0]) : .list(list))
        }
    }

    private static func decode(_ text: Substring) -> String {
        // Most values need neither step (DIDs, handles, cursors, numbers).
        guard text.utf8.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "%") }) else { return String(text) }
        // A broken escape goes on as written (the PDS judges it), its `+` still a space.
        return PercentDecoding.decode(text, plusIsSpace: true) ?? text.replacingOccurrences(of: "+", with: " ")
    }
}
