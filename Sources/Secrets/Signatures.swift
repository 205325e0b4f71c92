import CCrypto

/// The public-key signature schemes of JWS (RFC 7518 §3.3, §3.4).
public enum SignatureAlgorithm: Sendable {
    /// RSASSA-PKCS1-v1_5 with SHA-256 (`RS256`).
    case rs256
    /// ECDSA on P-256 with SHA-256, the signature as the 64 bytes `r || s` (`ES256`).
    case es256
}

/// A public key read from PEM (`-----BEGIN PUBLIC KEY-----`, SubjectPublicKeyInfo), able to check
/// RS256 and ES256 signatures.
///
/// The key is immutable once read, so one instance may verify on many threads at once (each call
/// uses its own digest context).
public final class PublicKey: @unchecked Sendable {
    /// What kind of key the PEM held.
    public enum Kind: Sendable, Equatable {
        case rsa(bits: Int)
        case ec(curve: String)
        case other
    }

    let key: OpaquePointer
    /// The key's type and size or curve.
    public let kind: Kind

    /// A key made in this module, of a known kind.
    init(key: OpaquePointer, kind: Kind) {
        self.key = key
        self.kind = kind
    }

    /// Reads a PEM public key; nil when the text holds none (a private key, a certificate,
    /// garbage).
    public init?(pem: String) {
        let bytes = Array(pem.utf8)
        guard !bytes.isEmpty, bytes.count < 64 * 1024 else { return nil }
        let parsed: OpaquePointer? = bytes.withUnsafeBytes { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PUBKEY(bio, nil, nil, nil)
        }
        guard let parsed else { ERR_clear_error(); return nil }
        key = parsed
        kind = Self.kind(of: parsed)
        ERR_clear_error()
    }

    deinit { EVP_PKEY_free(key) }

    static func kind(of key: OpaquePointer) -> Kind {
        switch EVP_PKEY_get_base_id(key) {
        case EVP_PKEY_RSA:
            return .rsa(bits: Int(EVP_PKEY_get_bits(key)))
        case EVP_PKEY_EC:
            var name = [CChar](repeating: 0, count: 64)
            var length = 0
            guard EVP_PKEY_get_group_name(key, &name, name.count, &length) == 1 else { return .other }
            return .ec(curve: String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self))
        default:
            return .other
        }
    }

    /// Whether `signature` is a valid `algorithm` signature of `message` by this key. A key of the
    /// wrong kind for the algorithm never verifies.
    public func verify(_ algorithm: SignatureAlgorithm, message: [UInt8], signature: [UInt8]) -> Bool {
        let checked: [UInt8]
        switch (algorithm, kind) {
        case (.rs256, .rsa):
            checked = signature
        case (.es256, .ec(let curve)) where curve == "prime256v1" || curve == "P-256":
            guard signature.count == 64, let der = Self.derSignature(raw: signature) else { return false }
            checked = der
        default:
            return false
        }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context); ERR_clear_error() }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else { return false }
        return checked.withUnsafeBufferPointer { sig in
            message.withUnsafeBufferPointer { data in
                EVP_DigestVerify(context, sig.baseAddress, sig.count, data.baseAddress, data.count) == 1
            }
        }
    }

    /// The key as PEM text (SubjectPublicKeyInfo).
    public var pem: String { publicPEM(key) }

    /// JWS's `r || s` (32 bytes each) as the DER `ECDSA-Sig-Value` libcrypto verifies.
    private static func derSignature(raw: [UInt8]) -> [UInt8]? {
        guard let sig = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(sig) }
        let r = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, nil) }
        let s = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
        guard let r, let s else { BN_free(r); BN_free(s); return nil }
        guard ECDSA_SIG_set0(sig, r, s) == 1 else { BN_free(r); BN_free(s); return nil }
        let length = i2d_ECDSA_SIG(sig, nil)
        guard length > 0 else { return nil }
        var out = [UInt8](repeating: 0, count: Int(length))
        let written = out.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            return i2d_ECDSA_SIG(sig, &cursor)
        }
        return written == length ? out : nil
    }
}

/// A private key that signs RS256 and ES256: what a customer's backend holds. Herald itself only
/// verifies; the tests and `make bench` sign with it.
public final class PrivateKey: @unchecked Sendable {
    let key: OpaquePointer

    init(key: OpaquePointer) { self.key = key }
    deinit { EVP_PKEY_free(key) }

    /// A new RSA key of `bits` bits.
    public static func rsa(bits: Int) -> PrivateKey? {
        herald_rsa_generate(UInt32(bits)).map(PrivateKey.init(key:))
    }

    /// A new EC key on `curve` (`P-256`, `P-384`).
    public static func ec(curve: String) -> PrivateKey? {
        herald_ec_generate(curve).map(PrivateKey.init(key:))
    }

    /// The matching public key as PEM.
    public var publicKeyPEM: String { publicPEM(key) }

    /// The `algorithm` signature of `message`, in JWS form (`r || s` for ES256).
    public func sign(_ algorithm: SignatureAlgorithm, message: [UInt8]) -> [UInt8]? {
        guard let context = EVP_MD_CTX_new() else { return nil }
        defer { EVP_MD_CTX_free(context); ERR_clear_error() }
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key) == 1 else { return nil }
        var length = 0
        let sized = message.withUnsafeBufferPointer { EVP_DigestSign(context, nil, &length, $0.baseAddress, $0.count) }
        guard sized == 1 else { return nil }
        var out = [UInt8](repeating: 0, count: length)
        let signed = out.withUnsafeMutableBufferPointer { buffer in
            message.withUnsafeBufferPointer { EVP_DigestSign(context, buffer.baseAddress, &length, $0.baseAddress, $0.count) }
        }
        guard signed == 1 else { return nil }
        out.removeLast(out.count - length)
        switch algorithm {
        case .rs256: return out
        case .es256: return Self.rawSignature(der: out)
        }
    }

    /// A DER `ECDSA-Sig-Value` as JWS's `r || s`.
    private static func rawSignature(der: [UInt8]) -> [UInt8]? {
        let sig: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let sig else { return nil }
        defer { ECDSA_SIG_free(sig) }
        var r: OpaquePointer?
        var s: OpaquePointer?
        ECDSA_SIG_get0(sig, &r, &s)
        var out = [UInt8](repeating: 0, count: 64)
        let ok = out.withUnsafeMutableBufferPointer { buffer in
            BN_bn2binpad(r, buffer.baseAddress, 32) == 32 && BN_bn2binpad(s, buffer.baseAddress! + 32, 32) == 32
        }
        return ok ? out : nil
    }
}

/// The public half of `key` as PEM text (SubjectPublicKeyInfo).
private func publicPEM(_ key: OpaquePointer) -> String {
    guard let bio = BIO_new(BIO_s_mem()) else { return "" }
    defer { BIO_free(bio) }
    guard PEM_write_bio_PUBKEY(bio, key) == 1 else { return "" }
    var data: UnsafeMutablePointer<CChar>?
    let length = herald_bio_mem_data(bio, &data)
    guard let data, length > 0 else { return "" }
    return String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
}
