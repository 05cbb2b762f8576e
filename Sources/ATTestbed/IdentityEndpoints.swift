import JSONRPC
import Foundation
import NIOHTTP1

/// The PLC directory (`plc.<domain>`) and the handle hosts (`<name>.<domain>`): DID documents
/// and `/.well-known/atproto-did`.
struct IdentityEndpoints: Sendable {
    let context: TestbedContext

    func didDocument(for account: AccountState) -> JSONValue {
        let documentHandle = account.data.withLock { $0.documentHandle ?? $0.handle }
        let did = account.did
        return [
            "@context": [
                "https://www.w3.org/ns/did/v1",
                "https://w3id.org/security/multikey/v1",
                "https://w3id.org/security/suites/secp256k1-2019/v1",
            ],
            "id": .string(did),
            "alsoKnownAs": [.string("at://\(documentHandle)")],
            "verificationMethod": [
                [
                    "id": .string("\(did)#atproto"),
                    "type": "Multikey",
                    "controller": .string(did),
                    "publicKeyMultibase": .string(account.publicKeyMultibase),
                ]
            ],
            "service": [
                [
                    "id": "#atproto_pds",
                    "type": "AtprotoPersonalDataServer",
                    "serviceEndpoint": .string(context.pdsURL(ofDID: did)),
                ]
            ],
        ]
    }

    /// `GET https://plc.<domain>/<did>`.
    func handlePLC(_ request: TestbedRequest) -> TestbedResponse {
        guard request.method == .GET || request.method == .HEAD else {
            return .json(["message": "Method not allowed"], status: .methodNotAllowed)
        }
        let did = String(request.path.dropFirst()).removingPercentEncodingIfPossible
        guard did.hasPrefix("did:plc:"), let account = context.accounts.account(did: did), account.didMethod == .plc
        else {
            return .json(["message": .string("DID not registered: \(did)")], status: .notFound)
        }
        var response = TestbedResponse.json(didDocument(for: account))
        response.headers.replaceOrAdd(name: "Content-Type", value: "application/did+ld+json; charset=utf-8")
        return response
    }

    /// `GET https://<handle>/.well-known/atproto-did` and `/.well-known/did.json`.
    func handleHandleHost(_ request: TestbedRequest) -> TestbedResponse {
        switch request.path {
        case "/.well-known/atproto-did":
            guard let account = context.accounts.account(handle: request.host), account.publishWellKnown else {
                return .text("not found", status: .notFound)
            }
            return .text(account.did)
        case "/.well-known/did.json":
            // A did:web document lives at its DID's host, which stays put when the handle changes.
            guard let account = context.accounts.account(did: context.webDID(forHandle: request.host)) else {
                return .text("not found", status: .notFound)
            }
            return .json(didDocument(for: account))
        default:
            return .text("not found", status: .notFound)
        }
    }
}

extension String {
    var removingPercentEncodingIfPossible: String {
        contains("%") ? (removingPercentEncoding ?? self) : self
    }
}
