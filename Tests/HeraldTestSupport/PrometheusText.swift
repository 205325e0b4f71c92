/// A strict reader of Prometheus' text exposition format 0.0.4, for the tests of `/metrics`:
/// every line is HELP, TYPE or a sample of the family its TYPE announced; names and labels match
/// the grammar; values parse; a family's TYPE comes once and before its samples; histogram buckets
/// are cumulative and end in `+Inf` equal to `_count`. Pure: it throws what is wrong, and the unit
/// tests show it can (`PrometheusTextTests`).
public enum PrometheusText {
    /// One parsed exposition: samples by series text (`name{labels}`), and TYPE per family.
    public struct Exposition: Sendable {
        public var samples: [String: Double] = [:]
        public var types: [String: String] = [:]

        public func value(_ series: String) -> Double? { samples[series] }
    }

    /// What is not the text format, and where.
    public enum Error: Swift.Error, Equatable, CustomStringConvertible {
        case noFinalLineFeed
        case notALine(String)
        case typeGivenTwice(family: String)
        case sampleOutsideFamily(metric: String, family: String)
        case badValue(String)
        case seriesGivenTwice(String)
        case histogram(family: String, series: String, problem: String)

        public var description: String {
            switch self {
            case .noFinalLineFeed: "the exposition does not end with a line feed"
            case .notALine(let line): "not a line of the text format: \(line)"
            case .typeGivenTwice(let family): "TYPE of \(family) given twice"
            case .sampleOutsideFamily(let metric, let family): "sample \(metric) outside its family \(family)"
            case .badValue(let line): "no number in \(line)"
            case .seriesGivenTwice(let series): "series \(series) given twice"
            case .histogram(let family, let series, let problem): "\(family){\(series)}: \(problem)"
            }
        }
    }

    public static func parse(_ text: String) throws(Error) -> Exposition {
        var exposition = Exposition()
        let name = #"[a-zA-Z_:][a-zA-Z0-9_:]*"#
        let label = #"[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\\\|\\"|\\n)*""#
        // the patterns are constants: they compile
        let sampleLine = try! Regex("^(\(name))(\\{(?:\(label))(?:,\(label))*\\})? (\\S+)$")
        let typeLine = try! Regex("^# TYPE (\(name)) (counter|gauge|histogram|summary|untyped)$")
        let helpLine = try! Regex("^# HELP (\(name)) .*$")
        guard text.hasSuffix("\n") else { throw .noFinalLineFeed }
        var current: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
            let line = String(line)
            if let match = try? typeLine.wholeMatch(in: line) {
                let family = String(match.output[1].substring!)
                guard exposition.types[family] == nil else { throw .typeGivenTwice(family: family) }
                exposition.types[family] = String(match.output[2].substring!)
                current = family
            } else if (try? helpLine.wholeMatch(in: line)) != nil {
                continue
            } else if let match = try? sampleLine.wholeMatch(in: line) {
                let metric = String(match.output[1].substring!)
                let family = current ?? ""
                let allowed = exposition.types[family] == "histogram" ? [family + "_bucket", family + "_sum", family + "_count"] : [family]
                guard allowed.contains(metric) else { throw .sampleOutsideFamily(metric: metric, family: family) }
                guard let value = Double(String(match.output[3].substring!).replacing("+Inf", with: "inf")) else { throw .badValue(line) }
                let series = metric + (match.output[2].substring.map(String.init) ?? "")
                guard exposition.samples[series] == nil else { throw .seriesGivenTwice(series) }
                exposition.samples[series] = value
            } else {
                throw .notALine(line)
            }
        }
        // Histograms: per series, cumulative buckets with +Inf == _count, and a _sum.
        for (family, type) in exposition.types where type == "histogram" {
            var bySeries: [String: [(Double, Double)]] = [:]
            for (series, value) in exposition.samples where series.hasPrefix(family + "_bucket{") {
                let parts = series.dropFirst(family.count + "_bucket{".count).dropLast().split(separator: ",")
                guard let le = parts.first(where: { $0.hasPrefix("le=") })?.dropFirst(4).dropLast(),
                      let bound = le == "+Inf" ? Double.infinity : Double(le) else {
                    throw .histogram(family: family, series: series, problem: "a bucket without a numeric le")
                }
                bySeries[parts.filter { !$0.hasPrefix("le=") }.joined(separator: ","), default: []].append((bound, value))
            }
            for (rest, buckets) in bySeries {
                let labels = rest.isEmpty ? "" : "{\(rest)}"
                let sorted = buckets.sorted { $0.0 < $1.0 }
                guard zip(sorted, sorted.dropFirst()).allSatisfy({ $0.1 <= $1.1 }) else {
                    throw .histogram(family: family, series: rest, problem: "buckets are not cumulative")
                }
                guard sorted.last?.0 == .infinity else { throw .histogram(family: family, series: rest, problem: "no +Inf bucket") }
                guard sorted.last?.1 == exposition.samples["\(family)_count\(labels)"] else {
                    throw .histogram(family: family, series: rest, problem: "+Inf differs from _count")
                }
                guard exposition.samples["\(family)_sum\(labels)"] != nil else { throw .histogram(family: family, series: rest, problem: "no _sum") }
            }
        }
        return exposition
    }
}
