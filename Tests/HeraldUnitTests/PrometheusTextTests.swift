import HeraldTestSupport
import Testing

/// The reader `MetricsTests` checks `/metrics` with must be able to say no: each kind of
/// malformed exposition is refused with its own error, and a well-formed one is read.
@Suite("The Prometheus text reader of the tests")
struct PrometheusTextTests {
    @Test("a well-formed exposition, with a labelled histogram, is read")
    func reads() throws {
        let exposition = try PrometheusText.parse("""
            # HELP a A counter.
            # TYPE a counter
            a{x="1"} 1
            # TYPE h histogram
            h_bucket{le="1",p="apns"} 1
            h_bucket{le="+Inf",p="apns"} 2
            h_sum{p="apns"} 1.5
            h_count{p="apns"} 2

            """)
        #expect(exposition.value(#"a{x="1"}"#) == 1 && exposition.value(#"h_count{p="apns"}"#) == 2 && exposition.types["h"] == "histogram")
    }

    @Test("what is not the text format is refused, naming why")
    func refuses() {
        let cases: [(String, PrometheusText.Error)] = [
            ("# TYPE a counter\na{x=\"1\"} 1\nb 2\n", .sampleOutsideFamily(metric: "b", family: "a")),
            ("# TYPE a counter\na one\n", .badValue("a one")), ("# TYPE a counter\na{x=1} 1\n", .notALine("a{x=1} 1")),
            ("# TYPE a counter\na 1", .noFinalLineFeed),
            ("# TYPE a counter\n# TYPE a counter\n", .typeGivenTwice(family: "a")),
            ("# TYPE a counter\na 1\na 2\n", .seriesGivenTwice("a")),
            ("# TYPE h histogram\nh_bucket{le=\"1\"} 3\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 2\n",
             .histogram(family: "h", series: "", problem: "buckets are not cumulative")),
            ("# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n", .histogram(family: "h", series: "", problem: "+Inf differs from _count")),
        ]
        for (text, error) in cases {
            #expect(throws: error) { try PrometheusText.parse(text) }
        }
    }
}
