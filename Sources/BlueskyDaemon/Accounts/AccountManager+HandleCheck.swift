import ATIdentity
import ATSyntax
import Foundation

extension AccountManager {
    /// Checks an unverified handle both ways (DID document → handle → DID) and, when it holds,
    /// lets the account be named by it. A PDS reports handle changes on refresh; this is where
    /// such a report becomes trusted. Failures only leave the handle unverified.
    func confirmHandle(of session: AccountSession) async {
        let record = await session.record
        guard let handle = record.handle, !record.handleVerified, let did = DID(record.did) else { return }
        identity.invalidate(.did(did))
        if let parsed = Handle(handle) { identity.invalidate(.handle(parsed)) }
        guard let resolved = try? await identity.resolve(.did(did)),
              resolved.handleVerified, resolved.handle?.description.lowercased() == handle.lowercased() else {
            logger.notice("the account's handle could not be verified", metadata: [
                "account": "\(record.id.uuidString.lowercased())", "did": "\(record.did)", "handle": "\(handle)",
            ])
            return
        }
        do {
            try await session.markHandleVerified(handle)
        } catch {
            logger.error("cannot save the verified handle", metadata: ["error": "\(error)"])
        }
    }
}
