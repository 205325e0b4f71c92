import HTTPClient
import HTTPServer
import Synchronization
import Testing

/// SPEC §13.3's internal addresses (`OutboundAddress`, pure; no DNS here), and the client that
/// will not connect to one.
@Suite("Outbound addresses (SSRF)")
struct OutboundAddressTests {
    static func v4(_ text: String) -> [UInt8] { text.split(separator: ".").map { UInt8($0)! } }

    /// 8 groups of hex, `::` expanded (enough for the tests' literals).
    static func v6(_ text: String) -> [UInt8] {
        let halves = text.components(separatedBy: "::")
        func groups(_ part: String) -> [UInt16] {
            part.isEmpty ? [] : part.split(separator: ":").map { UInt16($0, radix: 16)! }
        }
        let head = groups(halves[0]), tail = halves.count > 1 ? groups(halves[1]) : []
        let all = head + [UInt16](repeating: 0, count: 8 - head.count - tail.count) + tail
        return all.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
    }

    @Test("internal IPv4: loopback, private, shared, link-local, unspecified, multicast and reserved", arguments: [
        "127.0.0.1", "127.255.255.254", "0.0.0.0", "0.1.2.3", "10.0.0.1", "10.255.255.255", "172.16.0.1", "172.31.255.255",
        "192.168.0.1", "192.168.255.255", "169.254.169.254", "169.254.0.1", "100.64.0.1", "100.127.255.255",
        "192.0.0.8", "198.18.0.1", "198.19.255.255", "224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.255",
    ])
    func internalIPv4(address: String) {
        #expect(OutboundAddress.isInternal(Self.v4(address)))
    }

    @Test("public IPv4, next to the internal ranges", arguments: [
        "8.8.8.8", "1.1.1.1", "93.184.216.34", "9.255.255.255", "11.0.0.0", "126.255.255.255", "128.0.0.1",
        "172.15.255.255", "172.32.0.0", "192.167.255.255", "192.169.0.0", "169.253.255.255", "169.255.0.0",
        "100.63.255.255", "100.128.0.0", "198.17.255.255", "198.20.0.0", "223.255.255.255", "192.0.1.1",
    ])
    func publicIPv4(address: String) {
        #expect(!OutboundAddress.isInternal(Self.v4(address)))
    }

    @Test("internal IPv6, and IPv6 forms of internal IPv4 addresses", arguments: [
        "::1", "::", "fc00::1", "fd12:3456:789a::1", "fe80::1", "febf:ffff::1", "fec0::1", "ff02::1",
        "::ffff:7f00:1", "::ffff:a00:1", "::ffff:a9fe:a9fe", "::ffff:0:0", "::7f00:1", "64:ff9b::a00:1", "64:ff9b:1::1",
        "2002:7f00:1::1", "2002:c0a8:101::1", "100::1",
    ])
    func internalIPv6(address: String) {
        #expect(OutboundAddress.isInternal(Self.v6(address)))
    }

    @Test("public IPv6", arguments: [
        "2606:4700:4700::1111", "2001:4860:4860::8888", "2001:db8::1", "fbff::1", "fe00::1", "::ffff:808:808",
        "64:ff9b::808:808", "2002:808:808::1",
    ])
    func publicIPv6(address: String) {
        #expect(!OutboundAddress.isInternal(Self.v6(address)))
    }

    @Test("anything that is not 4 or 16 bytes is not an address to connect to")
    func malformed() {
        #expect(OutboundAddress.isInternal([]) && OutboundAddress.isInternal([1, 2, 3]) && OutboundAddress.isInternal([UInt8](repeating: 8, count: 5)))
    }

    @Test("localhost names", arguments: [("localhost", true), ("LocalHost.", true), ("api.localhost", true),
                                         ("localhost.example.com", false), ("notlocalhost", false), ("example.com", false)])
    func localNames(host: String, local: Bool) {
        #expect(OutboundAddress.isLocalName(host) == local)
    }

    @Test("the host as libcurl reads it: numeric IPv4 forms normalised, IPv6 without brackets, userinfo and port dropped", arguments: [
        ("http://127.0.0.1/hook", "127.0.0.1"), ("http://2130706433/", "127.0.0.1"), ("http://0x7f.1/", "127.0.0.1"),
        ("http://0177.0.0.1/", "127.0.0.1"), ("http://127.1:8080/x", "127.0.0.1"), ("https://user:pw@10.0.0.1:8443/a?b#c", "10.0.0.1"),
        ("http://public.example@192.168.1.1/", "192.168.1.1"), ("http://[::1]:9000/", "::1"), ("http://[fe80::1%25eth0]/", "fe80::1"),
        ("https://Hooks.Example.com/x", "hooks.example.com"), ("ftp://x/", "x"), ("http://", nil),
    ])
    func host(url: String, host: String?) {
        #expect(OutboundAddress.host(ofURL: url)?.lowercased() == host, "\(url)")
    }

    @Test("numeric hosts are judged without DNS", arguments: [
        ("http://127.0.0.1/", true), ("http://2130706433/", true), ("http://0x7f.1/", true), ("http://[::1]/", true),
        ("http://[::ffff:127.0.0.1]/", true), ("http://localhost:1/", true), ("http://169.254.169.254/latest", true),
        ("http://93.184.216.34/hook", false), ("http://[2606:4700:4700::1111]/", false), ("not a url", false),
    ])
    func numericURLs(url: String, refused: Bool) {
        #expect(OutboundAddress.isInternal(url: url) == refused, "\(url)")
    }

    @Test("the client connects to no internal address unless allowed: the request is never received")
    func clientRefuses() throws {
        let received = Mutex(0)
        let server = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threads: 2)) { _ in
            received.withLock { $0 += 1 }
            return Response(status: 200, body: Array("internal answer".utf8))
        }
        try server.start()
        defer { server.shutdown(drainTimeoutSeconds: 1) }
        let request = OutboundRequest(url: "http://127.0.0.1:\(server.port)/hook", headers: [], body: Array("{}".utf8), timeoutMs: 2000)
        let refused = HTTPClient(userAgent: "test").perform([request, request], concurrency: 2)
        #expect(refused.allSatisfy { $0.failure == .refusedAddress && $0.status == 0 && $0.body.isEmpty })
        #expect(received.withLock { $0 } == 0)
        let allowed = HTTPClient(userAgent: "test", allowInternalAddresses: true).perform([request], concurrency: 1)
        #expect(allowed[0].status == 200 && received.withLock { $0 } == 1)
    }
}
