import Foundation
import NIOSSL

/// The TLS configuration both outbound clients share: the system's trust store plus the
/// certificate authorities of `ca_file`.
enum TrustRoots {
    static func clientConfiguration(extraCAFile: String?) throws(HTTPError) -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        // A connection closed at its deadline is closed at once: a server that stalled its
        // answer will not answer close_notify either, and a stop must not wait 5 s for it.
        tls.shutdownTimeout = .milliseconds(500)
        if let caFile = extraCAFile {
            guard FileManager.default.isReadableFile(atPath: caFile) else {
                throw .unusableCAFile(caFile, reason: "no such readable file")
            }
            guard let certificates = try? NIOSSLCertificate.fromPEMFile(caFile), !certificates.isEmpty else {
                throw .unusableCAFile(caFile, reason: "it holds no PEM certificate")
            }
            tls.additionalTrustRoots = [.certificates(certificates)]
        }
        return tls
    }
}
