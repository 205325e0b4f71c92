@testable import HeraldAPI
@testable import HeraldApp
@testable import HeraldDomain
@testable import HeraldStore
import Testing

/// SPEC §17's hold rule as one routing pass applies it (`DigestWindows.holds`), without a database.
@Suite("Digest windows")
struct DigestWindowTests {
    @Test("the first digestible reply opens a window; replies inside it are held; the end and later replies open a new one")
    func holds() {
        var windows = DigestWindows(settings: .defaults)
        let held1 = windows.holds(thread: "p", recipient: "bob", message: "r1", at: 1_000, stored: nil, seconds: 5)
        #expect(!held1)
        let held2 = windows.holds(thread: "p", recipient: "bob", message: "r2", at: 1_001, stored: nil, seconds: 5)
        #expect(held2)
        let held3 = windows.holds(thread: "p", recipient: "bob", message: "r3", at: 5_999, stored: nil, seconds: 5)
        #expect(held3)
        // the end is not inside: a reply at it opens the next window
        let held4 = windows.holds(thread: "p", recipient: "bob", message: "r4", at: 6_000, stored: nil, seconds: 5)
        #expect(!held4)
        // other recipients and threads have windows of their own
        let held5 = windows.holds(thread: "p", recipient: "carol", message: "r4", at: 6_000, stored: nil, seconds: 5)
        #expect(!held5)
        let held6 = windows.holds(thread: "q", recipient: "bob", message: "s1", at: 6_000, stored: nil, seconds: 5)
        #expect(!held6)
        #expect(windows.openings.map { "\($0.thread)/\($0.uid)/\($0.message)/\($0.at)-\($0.endsAt)" }
                    == ["p/bob/r1/1000-6000", "p/bob/r4/6000-11000", "p/carol/r4/6000-11000", "q/bob/s1/6000-11000"])
    }

    @Test("a stored window holds the replies routed while it is open, and not one routed before it opened")
    func stored() {
        var windows = DigestWindows(settings: .defaults)
        let held7 = windows.holds(thread: "p", recipient: "bob", message: "r2", at: 2_000, stored: "1000 6000", seconds: 5)
        #expect(held7)
        // a large group's chunk of an earlier reply, done after a later one opened the window
        let held8 = windows.holds(thread: "p", recipient: "eve", message: "r0", at: 900, stored: "1000 6000", seconds: 5)
        #expect(!held8)
        let held9 = windows.holds(thread: "p", recipient: "dan", message: "r9", at: 6_000, stored: "1000 6000", seconds: 5)
        #expect(!held9)
        #expect(windows.openings.map(\.uid) == ["eve", "dan"])
        #expect(DigestWindows.parse("12 34")! == (12, 34) && DigestWindows.parse("x") == nil && DigestWindows.parse(nil) == nil)
    }
}
