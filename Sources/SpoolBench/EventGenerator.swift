import Spool

/// Deterministic analytics events: the data every scenario writes, to Spool and to its
/// baseline alike.
///
/// Events look like the Sensors Analytics SDK's (`$AppStart`, `$AppEnd`, `$AppViewScreen`,
/// `$AppClick`, with device properties), about 300 bytes of JSON each. The same `seed`
/// gives the same bytes on every machine and every run (Spool's SplitMix64; no system randomness,
/// no clock).
///
/// Thread-safety: a value type; an ``EventSet`` is immutable once made and `Sendable`.
package struct EventGenerator: Sendable {
    private var random: SplitMix64
    private var time: Int64 = 1_700_000_000_000
    private var trackID: UInt32 = 0

    /// A generator whose output depends only on `seed`. The default seed is the one every
    /// published figure uses.
    package init(seed: UInt64 = 0x5EED_5B00_1A7A_10C5) {
        self.random = SplitMix64(seed: seed)
    }

    private mutating func next() -> UInt64 { random.next() }

    private mutating func below(_ bound: Int) -> Int {
        Int(next() % UInt64(bound))
    }

    private mutating func pick<T>(_ values: [T]) -> T {
        values[below(values.count)]
    }

    /// The next event, as UTF-8 JSON bytes.
    package mutating func nextEvent() -> [UInt8] {
        time += Int64(50 + below(4_000))
        trackID = UInt32(truncatingIfNeeded: next())
        let user = below(users.count)
        let device = devices[user % devices.count]
        let roll = below(100)
        let event: String
        var extra: String
        switch roll {
        case 0..<8:
            event = "$AppStart"
            extra = #","$is_first_time":\#(below(20) == 0),"$resume_from_background":\#(below(2) == 0)"#
        case 8..<16:
            event = "$AppEnd"
            extra = #","event_duration":\#(below(600_000)).\#(below(1000))"#
        case 16..<58:
            event = "$AppViewScreen"
            extra = #","$screen_name":"\#(pick(screens))""#
        default:
            event = "$AppClick"
            extra = #","$screen_name":"\#(pick(screens))","$element_content":"\#(pick(buttons))""#
        }
        let wifi = below(3) != 0
        let json = #"{"_track_id":\#(trackID),"time":\#(time),"type":"track","distinct_id":"\#(users[user])","event":"\#(event)","properties":{"$os":"iOS","$os_version":"\#(device.os)","$model":"\#(device.model)","$app_version":"4.2.\#(user % 4)","$wifi":\#(wifi),"$network_type":"\#(wifi ? "WIFI" : pick(networks))"\#(extra)}}"#
        return Array(json.utf8)
    }

    /// `count` events, made once and shared by every scenario of a run.
    package mutating func events(_ count: Int) -> EventSet {
        precondition(count > 0, "an EventSet holds at least one event")
        var out = [[UInt8]]()
        out.reserveCapacity(count)
        for _ in 0..<count { out.append(nextEvent()) }
        return EventSet(events: out)
    }
}

/// A fixed list of generated events. Scenarios that need more events than the set holds
/// cycle through it (64 KiB blocks never see a repeat: the set is far larger than a block).
package struct EventSet: Sendable {
    /// The events, each a UTF-8 JSON object.
    package let events: [[UInt8]]
    /// The sum of the events' sizes.
    package let totalBytes: Int

    package init(events: [[UInt8]]) {
        self.events = events
        self.totalBytes = events.reduce(0) { $0 + $1.count }
    }

    /// The number of events.
    package var count: Int { events.count }
    /// The mean event size in bytes.
    package var meanSize: Double { Double(totalBytes) / Double(events.count) }

    /// Event `index`, cycling past the end.
    @inline(__always)
    package subscript(cycling index: Int) -> [UInt8] { events[index % events.count] }

    /// Every event concatenated, as one buffer (for the raw zstd and write baselines).
    package func concatenated() -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(totalBytes)
        for event in events { out.append(contentsOf: event) }
        return out
    }
}

private struct Device {
    var model: String
    var os: String
}

private let devices = [
    Device(model: "iPhone15,2", os: "17.4.1"),
    Device(model: "iPhone14,5", os: "16.6"),
    Device(model: "iPhone16,1", os: "17.5"),
    Device(model: "iPhone12,1", os: "15.7.9"),
    Device(model: "iPad13,18", os: "17.3"),
    Device(model: "iPhone13,2", os: "16.7.2"),
]

/// Fifty users, each a stable UUID-shaped id (made from a fixed seed, so deterministic).
private let users: [String] = {
    var generator = EventGenerator(seed: 42)
    return (0..<50).map { _ in
        let hex = generator.hex(32)
        let c = Array(hex)
        return String(c[0..<8]) + "-" + String(c[8..<12]) + "-" + String(c[12..<16]) + "-" + String(c[16..<20]) + "-" + String(c[20..<32])
    }
}()

private let screens = [
    "HomeViewController", "ProductListViewController", "ProductDetailViewController",
    "CartViewController", "CheckoutViewController", "ProfileViewController",
    "SettingsViewController", "SearchViewController", "OrderHistoryViewController",
]
private let buttons = ["Add to cart", "Buy now", "Search", "Apply coupon", "Pay", "Share", "Like", "Back", "Sign in"]
private let networks = ["4G", "5G", "3G"]

extension EventGenerator {
    fileprivate mutating func hex(_ digits: Int) -> String {
        let alphabet = Array("0123456789abcdef")
        return String((0..<digits).map { _ in alphabet[below(16)] })
    }
}
