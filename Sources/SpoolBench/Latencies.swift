import Histogram

/// Per-call latencies of one measurement (or of several, merged): their distribution in an
/// HdrHistogram (3 significant digits: a value is within 0.1% of what was timed), and the
/// percentiles read from it, in microseconds.
///
/// The JSON holds the percentiles, the count and ``curve``; the histogram itself is not
/// written (a decoded value has none and cannot be merged).
package struct Latencies: Sendable, Codable {
    /// Median, 90th, 99th and 99.9th percentile and the largest latency, in microseconds.
    package var p50: Double
    package var p90: Double
    package var p99: Double
    package var p999: Double
    package var max: Double
    /// The number of calls timed.
    package var samples: Int
    /// The percentile curve: the latency (µs) at each of ``curvePercentiles``.
    package var curve: [Point]
    private var histogram: Histogram<UInt64>?

    /// One point of the percentile curve.
    package struct Point: Sendable, Codable, Equatable {
        /// The percentile, 0…100.
        package var percentile: Double
        /// The latency at it, in microseconds.
        package var micros: Double
    }

    /// The percentiles of ``curve``: the median out to the largest value, finer in the tail.
    package static let curvePercentiles: [Double] = [0, 50, 75, 90, 95, 99, 99.5, 99.9, 99.99, 100]

    private enum CodingKeys: String, CodingKey { case p50, p90, p99, p999, max, samples, curve }

    /// The distribution of `nanos`. Nil when there are no samples.
    package init?(nanos: [UInt64]) {
        guard !nanos.isEmpty else { return nil }
        var histogram = Histogram<UInt64>(numberOfSignificantValueDigits: .three)  // resizes itself
        for value in nanos { _ = histogram.record(value) }
        self.init(histogram)
    }

    private init(_ histogram: Histogram<UInt64>) {
        func micros(_ percentile: Double) -> Double { Double(histogram.valueAtPercentile(percentile)) / 1000 }
        self.histogram = histogram
        p50 = micros(50)
        p90 = micros(90)
        p99 = micros(99)
        p999 = micros(99.9)
        max = Double(histogram.max) / 1000
        samples = Int(histogram.totalCount)
        curve = Self.curvePercentiles.map { Point(percentile: $0, micros: micros($0)) }
    }

    /// The distribution of every call of `all` together; nil when `all` is empty. Values decoded
    /// from JSON carry no histogram: then the first one stands for all.
    package static func merged(_ all: [Latencies]) -> Latencies? {
        guard let first = all.first else { return nil }
        guard var histogram = first.histogram else { return first }
        for other in all.dropFirst() {
            guard let more = other.histogram else { return first }
            histogram.add(more)
        }
        return Latencies(histogram)
    }
}
