import CFerryOpenSSL

/// Hash functions of libcrypto used by signing and integrity checks.
public enum Digest {
    public static func sha256<C: Collection<UInt8>>(_ bytes: C) -> [UInt8] { oneShot(EVP_sha256(), bytes) }
    public static func md5<C: Collection<UInt8>>(_ bytes: C) -> [UInt8] { oneShot(EVP_md5(), bytes) }

    public static func hmacSHA256<K: Collection<UInt8>, D: Collection<UInt8>>(key: K, _ data: D) -> [UInt8] {
        let key = Array(key), data = Array(data)
        var out = [UInt8](repeating: 0, count: 32)
        var outLength = 0
        let ok = key.withUnsafeBufferPointer { k in
            data.withUnsafeBufferPointer { d in
                out.withUnsafeMutableBufferPointer { o in
                    EVP_Q_mac(nil, "HMAC", nil, "SHA256", nil, k.baseAddress, k.count,
                              d.baseAddress, d.count, o.baseAddress, 32, &outLength)
                }
            }
        }
        precondition(ok != nil && outLength == 32, "libcrypto HMAC-SHA256 failed")
        return out
    }

    private static func oneShot<C: Collection<UInt8>>(_ md: OpaquePointer?, _ bytes: C) -> [UInt8] {
        let hasher = Hasher(md)
        hasher.update(Array(bytes))
        return hasher.finish()
    }

    /// An incremental hash, for bodies read in chunks. Used by one thread at a time.
    public final class Hasher {
        private let context: OpaquePointer

        public static func sha256() -> Hasher { Hasher(EVP_sha256()) }
        public static func md5() -> Hasher { Hasher(EVP_md5()) }

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
