import Foundation
import JSONRPC
import WebBasics

/// Tests/DPoPTests/verify_dpop_proof.py: a DPoP proof checked with Python's joserfc, so that
/// the project's own Swift code is not the only judge of its proofs.
public enum ProofVerifier {
    /// Runs the script with `arguments` (proof, method, URL, options); status 0 means valid.
    public static func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("DPoPTests/verify_dpop_proof.py")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script.path] + arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }

    /// The claims of a compact JWS (its payload, decoded and parsed), unchecked: read them from a
    /// proof the script accepted, or from a token whose issuer is the testbed itself.
    public static func claims(_ jws: String) -> JSONValue? {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        guard let payload = Base64URL.decodeLeniently(parts[1]) else { return nil }
        return try? JSONValue.parse(payload)
    }
}
