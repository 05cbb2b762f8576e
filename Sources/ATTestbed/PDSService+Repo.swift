import Foundation
import JSONRPC

/// `com.atproto.repo.*`: records and blobs.
extension PDSService {
    /// The repo named by `repo`, which must be the caller's own for writes.
    private func writableRepo(_ repo: String, auth: Authenticated) throws(XRPCError) -> AccountState {
        guard let target = context.accounts.account(identifier: repo) else {
            throw .invalidRequest("Could not find repo: \(repo)")
        }
        guard target.did == auth.account.did else {
            throw XRPCError(.unauthorized, "AuthenticationRequired", "Authentication Required")
        }
        return target
    }

    private func readableRepo(_ repo: String) throws(XRPCError) -> AccountState {
        guard let target = context.accounts.account(identifier: repo) else {
            throw .invalidRequest("Could not find repo: \(repo)")
        }
        return target
    }

    private func validCollection(_ collection: String) throws(XRPCError) -> String {
        let segments = collection.split(separator: ".", omittingEmptySubsequences: false)
        guard segments.count >= 3, segments.allSatisfy({ !$0.isEmpty }) else {
            throw .invalidRequest("Invalid collection: \(collection)")
        }
        return collection
    }

    private func recordView(_ did: String, _ collection: String, _ record: StoredRecord) -> JSONValue {
        ["uri": .string("at://\(did)/\(collection)/\(record.rkey)"), "cid": .string(record.cid), "value": record.value]
    }

    private func requiredRecord(in body: [String: JSONValue]) throws(XRPCError) -> [String: JSONValue] {
        guard let record = body["record"]?.objectValue else {
            throw .invalidRequest("Input must have the property \"record\"")
        }
        return record
    }

    /// A create's or put's reply: the record's URI and CID, and a new commit.
    private func writeReply(_ did: String, _ collection: String, _ stored: StoredRecord) -> TestbedResponse {
        .json([
            "uri": .string("at://\(did)/\(collection)/\(stored.rkey)"),
            "cid": .string(stored.cid),
            "commit": context.makeCommit(),
            "validationStatus": "valid",
        ])
    }

    func createRecord(_ request: TestbedRequest) throws(XRPCError) -> TestbedResponse {
        let auth = try authenticateAccess(request)
        let body = try jsonBody(request)
        let target = try writableRepo(try requiredString("repo", in: body), auth: auth)
        let collection = try validCollection(try requiredString("collection", in: body))
        let record = try requiredRecord(in: body)
        let rkey = body["rkey"]?.stringValue
        if let rkey, !RecordKey.isValid(rkey) { throw .invalidRequest("Invalid record key: \(rkey)") }
        guard let stored = context.storeRecord(in: target, collection: collection, rkey: rkey, record: record) else {
            throw .invalidRequest("Record already exists: at://\(target.did)/\(collection)/\(rkey ?? "")")
        }
        return writeReply(target.did, collection, stored)
    }

    func getRecord(_ request: TestbedRequest) throws(XRPCError) -> TestbedResponse {
        _ = try authenticateAccessIfPresent(request)
        let repo = try requiredParameter("repo", request)
        let collection = try requiredParameter("collection", request)
        let rkey = try requiredParameter("rkey", request)
        let target = try readableRepo(repo)
        guard let record = target.data.withLock({ $0.collections[collection]?.records[rkey] }) else {
            throw XRPCError(
                .badRequest, "RecordNotFound", "Could not locate record: at://\(target.did)/\(collection)/\(rkey)")
        }
        return .json(recordView(target.did, collection, record))
    }

    func listRecords(_ request: TestbedRequest) throws(XRPCError) -> TestbedResponse {
        _ = try authenticateAccessIfPresent(request)
        let target = try readableRepo(try requiredParameter("repo", request))
        let collection = try requiredParameter("collection", request)
        let limit = try limitParameter(request)
        let reverse = request.query["reverse"] == "true"
        let cursor = request.query["cursor"].flatMap { $0.isEmpty ? nil : $0 }
        let page = target.data.withLock { data in
            data.collections[collection]?.page(limit: limit, cursor: cursor, reverse: reverse) ?? (records: [], cursor: nil)
        }
        var body: [String: JSONValue] = [
            "records": .array(page.records.map { recordView(target.did, collection, $0) })
        ]
        if let next = page.cursor { body["cursor"] = .string(next) }
        return .json(.object(body))
    }

    /// Creates or replaces the record at `rkey` (how clients write `app.bsky.actor.profile/self`).
    func putRecord(_ request: TestbedRequest) throws(XRPCError) -> TestbedResponse {
        let (body, target, collection, rkey) = try recordWrite(request)
        guard RecordKey.isValid(rkey) else { throw .invalidRequest("Invalid record key: \(rkey)") }
        let record = try requiredRecord(in: body)
        _ = context.deleteRecord(in: target, collection: collection, rkey: rkey)
        guard let stored = context.storeRecord(in: target, collection: collection, rkey: rkey, record: record) else {
            throw .invalidRequest("Record could not be written: at://\(target.did)/\(collection)/\(rkey)")
        }
        return writeReply(target.did, collection, stored)
    }

    /// The caller's own repo, the collection and the record key a put or delete names.
    private func recordWrite(_ request: TestbedRequest) throws(XRPCError)
        -> (body: [String: JSONValue], target: AccountState, collection: String, rkey: String)
    {
        let auth = try authenticateAccess(request)
        let body = try jsonBody(request)
        let target = try writableRepo(try requiredString("repo", in: body), auth: auth)
        let collection = try validCollection(try requiredString("collection", in: body))
        return (body, target, collection, try requiredString("rkey", in: body))
    }

    func deleteRecord(_ request: TestbedRequest) throws(XRPCError) -> TestbedResponse {
        let (_, target, collection, rkey) = try recordWrite(request)
        // Deleting a missing record succeeds without a commit, as in the reference PDS.
        guard context.deleteRecord(in: target, collection: collection, rkey: rkey) else { return .json([:]) }
        return .json(["commit": context.makeCommit()])
    }

    func uploadBlob(_ request: TestbedRequest) throws(XRPCError) -> TestbedResponse {
        let auth = try authenticateAccess(request)
        let bytes = request.body.readableBytesView
        let mimeType =
            request.headers.first(name: "content-type")
            .map { String($0.prefix { $0 != ";" }).trimmingCharacters(in: .whitespaces) }
            .flatMap { $0.isEmpty ? nil : $0 } ?? "application/octet-stream"
        let data = Array(bytes)
        let blob = BlobRecord(cid: ContentID.blob(data), mimeType: mimeType, size: data.count, bytes: data)
        auth.account.data.withLock { $0.blobs[blob.cid] = blob }
        return .json([
            "blob": [
                "$type": "blob",
                "ref": ["$link": .string(blob.cid)],
                "mimeType": .string(blob.mimeType),
                "size": .number(Double(blob.size)),
            ]
        ])
    }

    /// `com.atproto.sync.getBlob`: a blob's bytes, as uploaded, with its media type (public, as
    /// on the reference PDS).
    func getBlob(_ request: TestbedRequest) throws(XRPCError) -> TestbedResponse {
        _ = try authenticateAccessIfPresent(request)
        let did = try requiredParameter("did", request)
        let cid = try requiredParameter("cid", request)
        let target = try readableRepo(did)
        guard let blob = target.data.withLock({ $0.blobs[cid] }) else {
            throw XRPCError(.badRequest, "BlobNotFound", "Blob not found")
        }
        return TestbedResponse(status: .ok, headers: ["Content-Type": blob.mimeType], body: blob.bytes)
    }
}
