import CCrypto
import FoundationEssentials

/// What direct delivery (SPEC §13.4) needs of libcrypto besides signing: private keys read from
/// and written as PEM, P-256 points as raw bytes, ECDH, HKDF-SHA256 (RFC 5869) and AES-128-GCM —
/// the parts of Web Push's message encryption (RFC 8291) and of provider tokens.
extension PrivateKey {
    /// Reads a PEM private key: PKCS#8 (`BEGIN PRIVATE KEY`, as APNs' `.p8` files and Google's
    /// service accounts hold them) or the traditional EC and RSA forms. Nil for anything else.
    public static func pem(_ text: String) -> PrivateKey? {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count < 64 * 1024 else { return nil }
        let parsed: OpaquePointer? = bytes.withUnsafeBytes { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
            defer { BIO_free(bio) }
            // a password-protected key is refused, never asked for (OpenSSL's default callback
            // would prompt on the terminal)
            return PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in 0 }, nil)
        }
        defer { ERR_clear_error() }
        return parsed.map(PrivateKey.init(key:))
    }

    /// The key as PKCS#8 PEM (unencrypted: it is stored as a secret of the app's settings).
    public var pkcs8PEM: String {
        guard let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio); ERR_clear_error() }
        guard PEM_write_bio_PrivateKey(bio, key, nil, nil, 0, nil, nil) == 1 else { return "" }
        var data: UnsafeMutablePointer<CChar>?
        let length = herald_bio_mem_data(bio, &data)
        guard let data, length > 0 else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
    }

    /// Whether this is an RSA key of at least 2048 bits (what RS256 needs).
    public var isRSA2048: Bool {
        if case .rsa(let bits) = PublicKey.kind(of: key) { return bits >= 2048 }
        return false
    }

    /// Whether this is a P-256 key.
    public var isP256: Bool {
        PublicKey.kind(of: key) == .ec(curve: "prime256v1")
    }

    /// A new P-256 key (a Web Push message's ephemeral key), with its public point.
    public static func p256() -> (key: PrivateKey, point: [UInt8])? {
        guard let curve = P256.curve, let made = herald_keygen_like(curve.key) else { ERR_clear_error(); return nil }
        let key = PrivateKey(key: made)
        // made from the curve: only the point is read
        return P256.point(of: made, knownCurve: true).map { (key, $0) }
    }

    /// The public point of a P-256 key, uncompressed (`04 || X || Y`, 65 bytes), as Web Push
    /// writes keys (RFC 8291 §3.1, RFC 8292 §3.2); nil for any other key.
    public var p256PublicPoint: [UInt8]? { P256.point(of: key) }

    /// ECDH (P-256) with `peer`: the shared secret's x coordinate, 32 bytes.
    public func sharedSecret(with peer: PublicKey) -> [UInt8]? {
        guard let context = EVP_PKEY_CTX_new(key, nil) else { return nil }
        defer { EVP_PKEY_CTX_free(context); ERR_clear_error() }
        // The peer's point was checked to be on the curve when it was imported
        // (`PublicKey.p256(point:)`), which is all P-256 needs (cofactor 1): the check that
        // `EVP_PKEY_derive_set_peer` adds (the point's order, in generic arithmetic) would double
        // the cost of the ECDH and prove nothing more.
        guard EVP_PKEY_derive_init(context) == 1, EVP_PKEY_derive_set_peer_ex(context, peer.key, 0) == 1 else { return nil }
        var length = 0
        guard EVP_PKEY_derive(context, nil, &length) == 1 else { return nil }
        var out = [UInt8](repeating: 0, count: length)
        guard out.withUnsafeMutableBufferPointer({ EVP_PKEY_derive(context, $0.baseAddress, &length) }) == 1 else { return nil }
        return Array(out.prefix(length))
    }
}

extension PublicKey {
    /// A P-256 public key from its uncompressed point (`04 || X || Y`, 65 bytes: a browser's
    /// `p256dh`); nil when the bytes are not a point of the curve.
    public static func p256(point: [UInt8]) -> PublicKey? {
        guard point.count == 65, point[0] == 4, let curve = P256.curve else { return nil }
        defer { ERR_clear_error() }
        return point.withUnsafeBufferPointer { herald_p256_public_key_like(curve.key, $0.baseAddress, $0.count) }
            .map { PublicKey(key: $0, kind: .ec(curve: "prime256v1")) }
    }

    /// The uncompressed point of a P-256 key; nil for any other key.
    public var p256Point: [UInt8]? { kind == .ec(curve: "prime256v1") ? P256.point(of: key) : nil }
}

enum P256 {
    /// A P-256 key whose parameters new keys copy: OpenSSL builds a curve named by text anew
    /// each time (its Montgomery constants), which cost more than the import or the key
    /// generation it was part of. Only read, so shared by every thread.
    static let curve: PrivateKey? = herald_ec_generate("P-256").map(PrivateKey.init(key:))

    /// A key's public point when it is a P-256 point (65 bytes, uncompressed), read as a key
    /// parameter; nil for any other key. `knownCurve`: the key was made on P-256 here, so its
    /// curve is not read again.
    static func point(of key: OpaquePointer, knownCurve: Bool = false) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: 133)
        let length = out.withUnsafeMutableBufferPointer { herald_ec_public_point(key, $0.baseAddress, $0.count) }
        ERR_clear_error()
        guard length == 65, out[0] == 4 else { return nil }
        if knownCurve { return Array(out.prefix(65)) }
        // a 65-byte uncompressed point is P-256's (P-384's has 97): check the curve once more
        var name = [CChar](repeating: 0, count: 32)
        var nameLength = 0
        guard EVP_PKEY_get_group_name(key, &name, name.count, &nameLength) == 1,
              String(decoding: name.prefix(nameLength).map { UInt8(bitPattern: $0) }, as: UTF8.self) == "prime256v1" else { return nil }
        return Array(out.prefix(65))
    }
}

extension Secrets {
    /// HKDF with SHA-256 (RFC 5869): extract with `salt`, expand with `info` to `length` bytes.
    public static func hkdfSHA256(salt: [UInt8], inputKey: [UInt8], info: [UInt8], length: Int) -> [UInt8] {
        hkdfExpandSHA256(prk: hmacSHA256(key: salt, message: inputKey), info: info, length: length)
    }

    /// HKDF-Expand with SHA-256 (RFC 5869 §2.3): `length` bytes from the pseudorandom key `prk`.
    public static func hkdfExpandSHA256(prk: [UInt8], info: [UInt8], length: Int) -> [UInt8] {
        var out: [UInt8] = [], block: [UInt8] = [], counter: UInt8 = 1
        while out.count < length {
            block = hmacSHA256(key: prk, message: block + info + [counter])
            out += block
            counter &+= 1
        }
        return Array(out.prefix(length))
    }

    /// AES-128-GCM of `plaintext` under `key` (16 bytes) and `nonce` (12 bytes), no associated
    /// data: the ciphertext followed by the 16-byte tag. Nil on a wrong key or nonce size.
    public static func aes128GCMSeal(key: [UInt8], nonce: [UInt8], plaintext: [UInt8]) -> [UInt8]? {
        guard key.count == 16, nonce.count == 12, let context = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(context); ERR_clear_error() }
        guard EVP_EncryptInit_ex(context, EVP_aes_128_gcm(), nil, key, nonce) == 1 else { return nil }
        var out = [UInt8](repeating: 0, count: plaintext.count + 16)
        var length: Int32 = 0
        let updated = out.withUnsafeMutableBufferPointer { buffer in
            plaintext.withUnsafeBufferPointer { EVP_EncryptUpdate(context, buffer.baseAddress, &length, $0.baseAddress, Int32($0.count)) }
        }
        guard updated == 1 else { return nil }
        var tail: Int32 = 0
        let finished = out.withUnsafeMutableBufferPointer { EVP_EncryptFinal_ex(context, $0.baseAddress! + Int(length), &tail) }
        guard finished == 1 else { return nil }
        let body = Int(length + tail)
        var tag = [UInt8](repeating: 0, count: 16)
        guard tag.withUnsafeMutableBytes({ EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, 16, $0.baseAddress) }) == 1 else { return nil }
        return Array(out.prefix(body)) + tag
    }

    /// The inverse of `aes128GCMSeal`: the plaintext, or nil when the tag does not match.
    public static func aes128GCMOpen(key: [UInt8], nonce: [UInt8], sealed: [UInt8]) -> [UInt8]? {
        guard key.count == 16, nonce.count == 12, sealed.count >= 16, let context = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(context); ERR_clear_error() }
        guard EVP_DecryptInit_ex(context, EVP_aes_128_gcm(), nil, key, nonce) == 1 else { return nil }
        let ciphertext = Array(sealed.dropLast(16))
        var tag = Array(sealed.suffix(16))
        var out = [UInt8](repeating: 0, count: ciphertext.count + 16)
        var length: Int32 = 0
        let updated = out.withUnsafeMutableBufferPointer { buffer in
            ciphertext.withUnsafeBufferPointer { EVP_DecryptUpdate(context, buffer.baseAddress, &length, $0.baseAddress, Int32($0.count)) }
        }
        guard updated == 1,
              tag.withUnsafeMutableBytes({ EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, 16, $0.baseAddress) }) == 1 else { return nil }
        var tail: Int32 = 0
        let finished = out.withUnsafeMutableBufferPointer { EVP_DecryptFinal_ex(context, $0.baseAddress! + Int(length), &tail) }
        guard finished == 1 else { return nil }
        return Array(out.prefix(Int(length + tail)))
    }
}
