import Crypto
import Foundation
import NIOSSL
import SwiftASN1
import X509

/// A throwaway certificate authority and the one server certificate it signs for a testbed
/// (or another test server, such as PostgreSQL): SANs `<domain>`, `*.<domain>`, `localhost`
/// and the bind address.
public struct TestbedCertificates: Sendable {
    public let caCertificatePEM: String
    let serverCertificateDER: [UInt8]
    public let serverPrivateKeyPEM: String

    public init(domain: String, bindAddress: String, now: Date = Date()) throws {
        let caKey = P256.Signing.PrivateKey()
        let caName = try DistinguishedName {
            CommonName("atproto testbed CA (\(domain))")
            OrganizationName("blueskyd tests")
        }
        let notBefore = now.addingTimeInterval(-3600)
        // Long enough for tests that advance the testbed clock by months; TLS uses real time.
        let notAfter = now.addingTimeInterval(400 * 24 * 3600)
        let caCertificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: .init(caKey.publicKey),
            notValidBefore: notBefore,
            notValidAfter: notAfter,
            issuer: caName,
            subject: caName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                SubjectKeyIdentifier(hash: .init(caKey.publicKey))
            },
            issuerPrivateKey: .init(caKey)
        )

        let serverKey = P256.Signing.PrivateKey()
        let serverName = try DistinguishedName { CommonName(domain) }
        let serverCertificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: .init(serverKey.publicKey),
            notValidBefore: notBefore,
            notValidAfter: notAfter,
            issuer: caName,
            subject: serverName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true, keyEncipherment: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames(Self.subjectAlternativeNames(domain: domain, bindAddress: bindAddress))
                AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: .init(caKey.publicKey)).keyIdentifier)
            },
            issuerPrivateKey: .init(caKey)
        )

        caCertificatePEM = try caCertificate.serializeAsPEM().pemString
        var serializer = DER.Serializer()
        try serializer.serialize(serverCertificate)
        serverCertificateDER = serializer.serializedBytes
        serverPrivateKeyPEM = serverKey.pemRepresentation
    }

    private static func subjectAlternativeNames(domain: String, bindAddress: String) -> [GeneralName] {
        var names: [GeneralName] = [.dnsName(domain), .dnsName("*.\(domain)"), .dnsName("localhost")]
        if let address = ipAddressBytes(bindAddress) {
            names.append(.ipAddress(ASN1OctetString(contentBytes: address[...])))
        }
        return names
    }

    private static func ipAddressBytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        return nil
    }

    /// The server certificate, PEM.
    public var serverCertificatePEM: String {
        let base64 = Data(serverCertificateDER).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        return "-----BEGIN CERTIFICATE-----\n\(base64)\n-----END CERTIFICATE-----\n"
    }

    /// Writes `ca.pem` into `directory` (created if missing) and returns its path.
    public func writeCA(toDirectory directory: String) throws -> String {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = (directory as NSString).appendingPathComponent("ca.pem")
        try Data(caCertificatePEM.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        return path
    }

    func makeServerContext() throws -> NIOSSLContext {
        let certificate = try NIOSSLCertificate(bytes: serverCertificateDER, format: .der)
        let key = try NIOSSLPrivateKey(bytes: Array(serverPrivateKeyPEM.utf8), format: .pem)
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(certificate)],
            privateKey: .privateKey(key)
        )
        configuration.applicationProtocols = ["http/1.1"]
        return try NIOSSLContext(configuration: configuration)
    }
}
