@testable import HeraldAPI
@testable import HeraldApp
@testable import HeraldDomain
@testable import HeraldStore
import Testing

@Suite("W3C traceparent")
struct TraceContextTests {
    @Test("a W3C traceparent is kept, anything else is not")
    func validation() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        #expect(TraceContext.traceparent(good) == good)
        #expect(TraceContext.traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later") ==
                "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        for bad in [nil, "", "hello", good + "x", good.uppercased(), String(good.dropLast()),
                    "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                    "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\n{\"admin\":1}",
                    "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"] {
            #expect(TraceContext.traceparent(bad) == nil, "\(String(describing: bad))")
        }
    }
}
