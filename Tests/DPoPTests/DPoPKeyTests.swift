import Crypto
import DPoP
import Foundation
import Testing

@Suite("DPoP keys, JWKs and RFC 7638 thumbprints")
struct DPoPKeyTests {
    @Test("a known key's public JWK and thumbprint match those computed by joserfc")
    func fixtureThumbprint() {
        let key = FixtureKey.key
        #expect(key.publicJWK.x == FixtureKey.x)
        #expect(key.publicJWK.y == FixtureKey.y)
        #expect(key.thumbprint == FixtureKey.thumbprint)
        #expect(key.publicJWK.thumbprint == FixtureKey.thumbprint)
    }

    @Test("the thumbprint of RFC 7517 Appendix A.1's EC key matches joserfc's")
    func rfc7517Example() throws {
        let members = PublicJWK.Members(kty: "EC", crv: "P-256", x: "MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4",
                                        y: "4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM")
        let jwk = try #require(PublicJWK(members))
        #expect(jwk.thumbprint == "cn-I_WNMClehiVp51i_0VpOENW1upEerA8sEam5hn-s")
    }

    @Test("the thumbprint input is the required members, sorted, without whitespace (RFC 7638 §3.2)")
    func thumbprintInput() {
        let jwk = FixtureKey.key.publicJWK
        #expect(jwk.json == #"{"crv":"P-256","kty":"EC","x":"\#(FixtureKey.x)","y":"\#(FixtureKey.y)"}"#)
        #expect(jwk.thumbprint == Independent.sha256Base64URL(jwk.json))
    }

    @Test("the raw representation restores the same key, and garbage is refused")
    func storageRoundTrip() throws {
        let key = DPoPKey.generate()
        let restored = try DPoPKey(rawRepresentation: key.rawRepresentation)
        #expect(restored.thumbprint == key.thumbprint)
        #expect(restored.rawRepresentation == key.rawRepresentation)
        #expect(key.rawRepresentation.count == 32)
        #expect(throws: DPoPKeyError.invalidPrivateKey) { try DPoPKey(rawRepresentation: Data(repeating: 7, count: 5)) }
        // Zero is not a valid private scalar.
        #expect(throws: DPoPKeyError.invalidPrivateKey) { try DPoPKey(rawRepresentation: Data(count: 32)) }
        #expect(DPoPKey.generate().thumbprint != key.thumbprint)
    }

    @Test("printing a key shows its thumbprint, never the private scalar")
    func redactedDescription() {
        let key = FixtureKey.key
        let printed = [String(describing: key), String(reflecting: key), "\(key)"]
        let secretForms = [Independent.base64URLEncode(FixtureKey.rawPrivateKey),
                           FixtureKey.rawPrivateKey.base64EncodedString(),
                           FixtureKey.rawPrivateKey.map { String(format: "%02x", $0) }.joined()]
        for text in printed {
            #expect(text.contains(FixtureKey.thumbprint))
            for secret in secretForms { #expect(!text.contains(secret)) }
        }
    }

    @Test("a JWK must be a public EC P-256 point with 32-byte coordinates")
    func jwkValidation() {
        let good = PublicJWK.Members(kty: "EC", crv: "P-256", x: FixtureKey.x, y: FixtureKey.y)
        #expect(PublicJWK(good) != nil)
        var withPrivate = good
        withPrivate.d = Independent.base64URLEncode(FixtureKey.rawPrivateKey)
        var wrongCurve = good
        wrongCurve.crv = "P-384"
        var wrongType = good
        wrongType.kty = "RSA"
        var shortX = good
        shortX.x = String(FixtureKey.x.dropLast(2))
        var offCurve = good
        offCurve.y = FixtureKey.x
        var missingY = good
        missingY.y = nil
        for members in [withPrivate, wrongCurve, wrongType, shortX, offCurve, missingY] {
            #expect(PublicJWK(members) == nil, "\(members) should be refused")
        }
    }
}
