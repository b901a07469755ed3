import CFerryOpenSSL
import FerryCore

/// Hex SHA-256 of a claim-checked upload's bytes (OpenSSL's libcrypto, as the workers use it).
enum SHA256Hex {
    static func of(_ bytes: [UInt8]) -> String {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        _ = bytes.withUnsafeBytes { EVP_Digest($0.baseAddress, $0.count, &digest, &length, EVP_sha256(), nil) }
        return digest.prefix(Int(length)).hexString
    }
}
