import CCrypto

/// Random secrets, digests and constant-time comparison, backed by OpenSSL's libcrypto.
///
/// This module holds the only calls into libcrypto; the rest of Herald sees Swift values.
public enum Secrets {
    /// `count` bytes from OpenSSL's CSPRNG.
    ///
    /// Falls back to the system generator (getrandom) if OpenSSL refuses, which it only does when
    /// it cannot seed itself; both are cryptographically secure.
    public static func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let ok = bytes.withUnsafeMutableBufferPointer { buffer in
            RAND_bytes(buffer.baseAddress, Int32(count)) == 1
        }
        if !ok {
            var generator = SystemRandomNumberGenerator()
            for index in bytes.indices { bytes[index] = generator.next() }
        }
        return bytes
    }

    /// The SHA-256 digest of `bytes` (32 bytes).
    public static func sha256<Bytes: Collection>(_ bytes: Bytes) -> [UInt8] where Bytes.Element == UInt8 {
        let input = Array(bytes)
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        input.withUnsafeBufferPointer { inputBuffer in
            digest.withUnsafeMutableBufferPointer { out in
                _ = SHA256(inputBuffer.baseAddress, inputBuffer.count, out.baseAddress)
            }
        }
        return digest
    }

    /// The SHA-256 digest of a string's UTF-8 bytes.
    public static func sha256(_ string: String) -> [UInt8] {
        sha256(Array(string.utf8))
    }

    /// HMAC-SHA-256 of `message` under `key` (32 bytes).
    public static func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 32
        key.withUnsafeBufferPointer { keyBuffer in
            message.withUnsafeBufferPointer { messageBuffer in
                out.withUnsafeMutableBufferPointer { outBuffer in
                    _ = HMAC(EVP_sha256(), keyBuffer.baseAddress, Int32(keyBuffer.count), messageBuffer.baseAddress,
                             messageBuffer.count, outBuffer.baseAddress, &length)
                }
            }
        }
        return out
    }

    /// Whether two byte strings are equal, in time that depends only on their lengths.
    ///
    /// Compare digests (equal lengths) so that not even the length of a secret leaks.
    public static func constantTimeEqual(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        guard lhs.count == rhs.count else { return false }
        if lhs.isEmpty { return true }
        return lhs.withUnsafeBytes { a in
            rhs.withUnsafeBytes { b in
                CRYPTO_memcmp(a.baseAddress, b.baseAddress, a.count) == 0
            }
        }
    }

    /// Lower-case hexadecimal text of `bytes`.
    public static func hex(_ bytes: [UInt8]) -> String {
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Parses lower- or upper-case hexadecimal text; nil if it is not hex of even length.
    public static func unhex(_ text: String) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 2 == 0 else { return nil }
        func value(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        var out = [UInt8]()
        out.reserveCapacity(chars.count / 2)
        var index = 0
        while index < chars.count {
            guard let high = value(chars[index]), let low = value(chars[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }
}
