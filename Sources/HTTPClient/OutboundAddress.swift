import CCurl
import Glibc

/// Which addresses built-in delivery may connect to (SPEC §13.3): public ones. A receiver's URL
/// must not make Herald reach a service inside its own network (SSRF): loopback, private,
/// link-local, unique-local, unspecified, shared (CGNAT) and other non-public ranges are refused,
/// when the URL is saved (`isInternal(url:)`) and again for the address each connection is about
/// to use (`HTTPClient`, through libcurl's open-socket callback), which a name's later answer
/// (DNS rebinding) cannot get around.
public enum OutboundAddress {
    /// Whether an address (4 bytes for IPv4, 16 for IPv6, in network order) is one Herald does
    /// not deliver to. Pure. IPv6 forms that carry an IPv4 address (mapped, compatible, NAT64,
    /// 6to4) are judged by that address.
    public static func isInternal(_ address: [UInt8]) -> Bool {
        switch address.count {
        case 4:
            let (a, b, c) = (address[0], address[1], address[2])
            return a == 0                              // 0/8: "this network", 0.0.0.0 unspecified
                || a == 10                             // 10/8 private
                || a == 127                            // 127/8 loopback
                || (a == 100 && b & 0xC0 == 64)        // 100.64/10 shared (CGNAT)
                || (a == 169 && b == 254)              // 169.254/16 link-local (cloud metadata)
                || (a == 172 && b & 0xF0 == 16)        // 172.16/12 private
                || (a == 192 && b == 168)              // 192.168/16 private
                || (a == 192 && b == 0 && c == 0)      // 192.0.0/24 IETF protocol assignments
                || (a == 198 && b & 0xFE == 18)        // 198.18/15 benchmarking
                || a >= 224                            // multicast, reserved, broadcast
        case 16:
            let words = stride(from: 0, to: 16, by: 2).map { UInt16(address[$0]) << 8 | UInt16(address[$0 + 1]) }
            let embedded = Array(address[12..<16])
            if words[0..<5].allSatisfy({ $0 == 0 }) && (words[5] == 0xFFFF || words[5] == 0) {
                return isInternal(embedded)            // ::ffff:a.b.c.d mapped, ::a.b.c.d compatible, ::1, ::
            }
            if words[0] == 0x64 && words[1] == 0xFF9B {
                // 64:ff9b::/96 NAT64 of an IPv4 address; 64:ff9b:1::/48 local-use NAT64
                return words[2] == 1 || isInternal(embedded)
            }
            if words[0] == 0x2002 { return isInternal(Array(address[2..<6])) }   // 6to4 of an IPv4 address
            return words[0] & 0xFE00 == 0xFC00         // fc00::/7 unique-local
                || words[0] & 0xFFC0 == 0xFE80         // fe80::/10 link-local
                || words[0] & 0xFFC0 == 0xFEC0         // fec0::/10 site-local (deprecated)
                || words[0] & 0xFF00 == 0xFF00         // ff00::/8 multicast
                || (words[0] == 0x100 && words[1...3].allSatisfy { $0 == 0 })   // 100::/64 discard
        default:
            return true
        }
    }

    /// Whether a host name is one that names this machine whatever the resolver says:
    /// `localhost` and the names under it (RFC 6761 §6.3). Pure.
    public static func isLocalName(_ host: String) -> Bool {
        var name = host.lowercased()
        if name.hasSuffix(".") { name.removeLast() }
        return name == "localhost" || name.hasSuffix(".localhost")
    }

    /// The host of `url` as libcurl reads it (IPv4 in any of its numeric forms normalised,
    /// IPv6 without brackets or zone), nil when libcurl cannot read the URL.
    public static func host(ofURL url: String) -> String? {
        guard let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        guard curl_url_set(handle, CURLUPART_URL, url, 0) == CURLUE_OK else { return nil }
        var part: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, CURLUPART_HOST, &part, 0) == CURLUE_OK, let part else { return nil }
        defer { curl_free(part) }
        var host = String(cString: part)
        if host.hasPrefix("["), host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
            if let zone = host.firstIndex(of: "%") { host = String(host[..<zone]) }
        }
        return host
    }

    /// The addresses `host` stands for: a numeric host as it is (every form `inet_aton` reads),
    /// a name through the system's resolver (which may block on DNS). Empty when it resolves to none.
    public static func resolve(_ host: String) -> [[UInt8]] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0 else { return [] }
        defer { freeaddrinfo(list) }
        var addresses: [[UInt8]] = []
        var next = list
        while let entry = next {
            if let address = entry.pointee.ai_addr, let bytes = Self.bytes(family: entry.pointee.ai_family, sockaddr: UnsafeRawPointer(address)) {
                addresses.append(bytes)
            }
            next = entry.pointee.ai_next
        }
        return addresses
    }

    /// Whether `url`'s host is, or resolves to, an internal address (any of its addresses).
    /// A name that does not resolve now is not judged here: each connection is checked anyway.
    public static func isInternal(url: String) -> Bool {
        guard let host = host(ofURL: url) else { return false }
        if isLocalName(host) { return true }
        return resolve(host).contains(where: isInternal)
    }

    /// The address in a `sockaddr` of family `AF_INET` or `AF_INET6`; nil for any other.
    static func bytes(family: Int32, sockaddr: UnsafeRawPointer) -> [UInt8]? {
        switch family {
        case AF_INET:
            var address = sockaddr.loadUnaligned(fromByteOffset: MemoryLayout<sockaddr_in>.offset(of: \sockaddr_in.sin_addr)!, as: in_addr.self)
            return withUnsafeBytes(of: &address) { Array($0) }
        case AF_INET6:
            var address = sockaddr.loadUnaligned(fromByteOffset: MemoryLayout<sockaddr_in6>.offset(of: \sockaddr_in6.sin6_addr)!, as: in6_addr.self)
            return withUnsafeBytes(of: &address) { Array($0) }
        default:
            return nil
        }
    }
}
