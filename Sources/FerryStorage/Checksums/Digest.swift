import CFerryOpenSSL
import Foundation

/// Hash functions of libcrypto used by signing and integrity checks.
///
/// The algorithms are fetched from libcrypto's provider once per process.
/// Passing `EVP_sha256()` and the like, or calling `EVP_Q_mac`, makes
/// OpenSSL 3 fetch them again on every use: that lookup was a third of the
/// hashing cost of a small PUT (perf, pipeline benchmark S5).
public enum Digest {
    public static func sha256<C: Collection<UInt8>>(_ bytes: C) -> [UInt8] { oneShot(Algorithms.sha256, bytes) }
    public static func md5<C: Collection<UInt8>>(_ bytes: C) -> [UInt8] { oneShot(Algorithms.md5, bytes) }

    public static func hmacSHA256<K: Collection<UInt8>, D: Collection<UInt8>>(key: K, _ data: D) -> [UInt8] {
        let key = Array(key), data = Array(data)
        var out = [UInt8](repeating: 0, count: 32)
        var outLength = 0
        // A copy of the prepared context keeps its digest; only the key is new.
        guard let context = EVP_MAC_CTX_dup(Algorithms.hmacSHA256) else { preconditionFailure("libcrypto HMAC context failed") }
        defer { EVP_MAC_CTX_free(context) }
        let ok = key.withUnsafeBufferPointer { k in
            data.withUnsafeBufferPointer { d in
                out.withUnsafeMutableBufferPointer { o in
                    EVP_MAC_init(context, k.baseAddress, k.count, nil) == 1
                        && EVP_MAC_update(context, d.baseAddress, d.count) == 1
                        && EVP_MAC_final(context, o.baseAddress, &outLength, 32) == 1
                }
            }
        }
        precondition(ok && outLength == 32, "libcrypto HMAC-SHA256 failed")
        return out
    }

    /// What libcrypto gives once and every thread may share (fetched
    /// algorithms are immutable; a context prepared here is only copied).
    private enum Algorithms {
        nonisolated(unsafe) static let sha256: OpaquePointer? = EVP_MD_fetch(nil, "SHA256", nil) ?? EVP_sha256()
        nonisolated(unsafe) static let md5: OpaquePointer? = EVP_MD_fetch(nil, "MD5", nil) ?? EVP_md5()
        nonisolated(unsafe) static let hmacSHA256: OpaquePointer = {
            guard let mac = EVP_MAC_fetch(nil, "HMAC", nil), let context = EVP_MAC_CTX_new(mac) else {
                preconditionFailure("libcrypto has no HMAC")
            }
            EVP_MAC_free(mac)  // the context holds its own reference
            let digest = strdup("SHA256")
            defer { free(digest) }
            var params = [OSSL_PARAM_construct_utf8_string("digest", digest, 0), OSSL_PARAM_construct_end()]
            precondition(EVP_MAC_CTX_set_params(context, &params) == 1, "libcrypto HMAC-SHA256 setup failed")
            return context
        }()
    }

    private static func oneShot<C: Collection<UInt8>>(_ md: OpaquePointer?, _ bytes: C) -> [UInt8] {
        let hasher = Hasher(md)
        hasher.update(Array(bytes))
        return hasher.finish()
    }

    /// An incremental hash, for bodies read in chunks. Used by one thread at a time.
    public final class Hasher {
        private let context: OpaquePointer

        public static func sha256() -> Hasher { Hasher(Algorithms.sha256) }
        public static func md5() -> Hasher { Hasher(Algorithms.md5) }

        init(_ md: OpaquePointer?) {
            guard let ctx = EVP_MD_CTX_new(), EVP_DigestInit_ex(ctx, md, nil) == 1 else {
                preconditionFailure("libcrypto digest init failed")
            }
            context = ctx
        }

        public func update(_ buffer: UnsafeRawBufferPointer) {
            guard let base = buffer.baseAddress, buffer.count > 0 else { return }
            EVP_DigestUpdate(context, base, buffer.count)
        }

        public func update(_ bytes: [UInt8]) {
            bytes.withUnsafeBytes { update($0) }
        }

        public func finish() -> [UInt8] {
            var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
            var length: UInt32 = 0
            EVP_DigestFinal_ex(context, &out, &length)
            return Array(out.prefix(Int(length)))
        }

        deinit { EVP_MD_CTX_free(context) }
    }
}
