import Testing
@testable import SpoolSync

@Suite struct BackoffTests {
    let backoff = Backoff()

    /// 100 ms first (AWS's and Google's clients' first step), doubling to a minute.
    @Test func ceilingDoublesFromTheBaseUpToTheCap() {
        let delays = (1...12).map { backoff.delay(afterFailures: $0, unit: 1) }
        #expect(delays == [100, 200, 400, 800, 1_600, 3_200, 6_400, 12_800, 25_600, 51_200, 60_000, 60_000].map { Duration.milliseconds($0) })
    }

    @Test func fullJitterSpansZeroToTheCeiling() {
        #expect(backoff.delay(afterFailures: 5, unit: 0) == .zero)
        #expect(backoff.delay(afterFailures: 5, unit: 0.25) == .milliseconds(400))
        #expect(backoff.delay(afterFailures: 5, unit: 7) == .milliseconds(1_600))  // clamped draw
    }

    @Test func baseFactorAndCapAreConfigurable() {
        let custom = Backoff(base: .milliseconds(100), factor: 3, cap: .seconds(2))
        let delays = (1...5).map { custom.delay(afterFailures: $0, unit: 1) }
        #expect(delays == [.milliseconds(100), .milliseconds(300), .milliseconds(900), .seconds(2), .seconds(2)])
    }

    @Test func hugeFailureCountsStayAtTheCap() {
        #expect(backoff.delay(afterFailures: 100_000, unit: 1) == .seconds(60))
        #expect(backoff.delay(afterFailures: 0, unit: 1) == .milliseconds(100))
    }

    @Test func retryAfterIsAFloorCappedAtMaxRetryAfter() {
        #expect(backoff.delay(afterFailures: 1, retryAfter: .seconds(30), unit: 1) == .seconds(30))
        #expect(backoff.delay(afterFailures: 11, retryAfter: .seconds(5), unit: 1) == .seconds(60))
        #expect(backoff.delay(afterFailures: 1, retryAfter: .seconds(86_400), unit: 0) == .seconds(3600))
        #expect(backoff.delay(afterFailures: 1, retryAfter: .seconds(-5), unit: 0) == .zero)
    }

    @Test func validationNamesTheField() {
        var configuration = SyncConfiguration()
        configuration.backoff.factor = 0.5
        #expect { try configuration.validate() } throws: { error in
            (error as? SyncError)?.message.contains("backoff.factor") == true
        }
    }
}

@Suite struct RetryAfterTests {
    // Sun, 06 Nov 1994 08:49:37 GMT
    let date: Double = 784_111_777

    @Test func delaySeconds() {
        #expect(RetryAfter.parse("120", now: 0) == .seconds(120))
        #expect(RetryAfter.parse(" 0 ", now: 0) == .zero)
    }

    @Test(arguments: ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"])
    func httpDateInEveryForm(value: String) {
        #expect(RetryAfter.parseHTTPDate(value) == Int64(date))
        #expect(RetryAfter.parse(value, now: date - 30) == .seconds(30))
    }

    @Test func dateInThePastMeansNow() {
        #expect(RetryAfter.parse("Sun, 06 Nov 1994 08:49:37 GMT", now: date + 100) == .zero)
    }

    @Test func leapDayAndCenturyDates() {
        #expect(RetryAfter.parseHTTPDate("Thu, 29 Feb 2024 00:00:00 GMT") == 1_709_164_800)
        #expect(RetryAfter.parseHTTPDate("Sat, 01 Jan 2000 00:00:00 GMT") == 946_684_800)
    }

    @Test(arguments: ["", "soon", "-5", "1.5", "Sun, 06 Nov 1994 08:49 GMT", "Sun, 06 Nov 1994 08:49:37 PST", "Sun, 06 Foo 1994 08:49:37 GMT"])
    func garbageIsIgnored(value: String) {
        #expect(RetryAfter.parse(value, now: date) == nil)
    }

    /// A wait too long to hold is a long wait, capped by the caller, not no wait at all.
    @Test(arguments: ["99999999999999", "99999999999999999999999"])
    func anOverlongDelayIsCappedNotIgnored(value: String) throws {
        let parsed = try #require(RetryAfter.parse(value, now: date))
        #expect(parsed >= .seconds(1 << 40))
        #expect(Backoff().delay(afterFailures: 1, retryAfter: parsed, unit: 0) == Backoff().maxRetryAfter)
        let outcome = HTTPSink.outcome(
            of: UploadResponse(status: 503, headers: ["retry-after": value], body: []), retryableStatuses: [], now: date)
        guard case .retry(let error) = outcome else { Issue.record("expected a retry"); return }
        #expect(error.retryAfter == parsed)
    }
}

@Suite struct HTTPSinkAnswerTests {
    func classify(_ status: Int, headers: [String: String] = [:], body: String = "") -> SinkOutcome {
        HTTPSink.outcome(
            of: UploadResponse(status: status, headers: headers, body: Array(body.utf8)),
            retryableStatuses: SyncConfiguration().http.retryableStatuses, now: 784_111_777)
    }

    func code(_ outcome: SinkOutcome) -> String {
        switch outcome {
        case .accepted: "accepted"
        case .retry(let error): "retry(\(error.code))"
        case .tooLarge: "tooLarge"
        case .rejected: "rejected"
        case .fatal(let error): "fatal(\(error.code))"
        }
    }

    @Test func statusesMapToPolicies() {
        #expect(code(classify(200)) == "accepted")
        #expect(code(classify(204)) == "accepted")
        #expect(code(classify(413)) == "tooLarge")
        #expect(code(classify(429)) == "retry(rateLimited)")
        #expect(code(classify(408)) == "retry(serverError)")
        #expect(code(classify(500)) == "retry(serverError)")
        #expect(code(classify(503)) == "retry(serverError)")
        #expect(code(classify(401)) == "retry(unauthorized)")
        #expect(code(classify(403)) == "retry(unauthorized)")
        #expect(code(classify(407)) == "retry(unauthorized)")
        #expect(code(classify(400)) == "rejected")
        #expect(code(classify(422)) == "rejected")
    }

    /// A wrong token says so, and names the header to check (issue #33: it read
    /// `serverError: the server failed (HTTP 401)`).
    @Test func refusedCredentialsNameTheHeaderToCheck() {
        guard case .retry(let unauthorized) = classify(401), case .retry(let proxy) = classify(407) else { Issue.record(); return }
        #expect("\(unauthorized)" == "unauthorized: the server refused the request's credentials (unauthorized): check the Authorization header (HTTP 401)")
        #expect("\(proxy)".contains("Proxy-Authorization"))
        // Not listed as retryable: a refusal like any other 4xx.
        #expect(code(HTTPSink.outcome(of: UploadResponse(status: 401), retryableStatuses: [], now: 0)) == "rejected")
    }

    /// The sink, not the machine, says which answers mean overload: 429, 503 and 408 (as the
    /// machine read them before issue 34), and no other status.
    @Test func onlyRateLimitsUnavailableAndRequestTimeoutsMeanOverload() {
        func overloaded(_ status: Int) -> Bool {
            if case .retry(let error) = classify(status) { return error.overloaded }
            return false
        }
        for status in [429, 503, 408] { #expect(overloaded(status), "\(status)") }
        for status in [200, 400, 401, 403, 407, 413, 422, 500, 501, 502, 504, 302, 600] { #expect(!overloaded(status), "\(status)") }
        // No answer in time, whoever saw it (the uploaders, the worker's own timer): overload.
        #expect(SyncError(.timeout, "no answer").overloaded)
        #expect(!SyncError(.network, "refused").overloaded)
        #expect(!SyncError(.timeout, "cancelled", overloaded: false).overloaded)
    }

    @Test(arguments: [408, 429])
    func requestTimeoutAndRateLimitAreRetriedEvenWhenNotListed(status: Int) {
        let outcome = HTTPSink.outcome(of: UploadResponse(status: status), retryableStatuses: [], now: 0)
        #expect(code(outcome).hasPrefix("retry("))
    }

    @Test(arguments: [100, 302, 304, 600, 999, 0, -1])
    func unexpectedStatusesAreRetriedNeverCommitted(status: Int) {
        #expect(code(classify(status)) == "retry(unexpectedResponse)")
    }

    /// `Spool-Max-Concurrent-Requests`: 1 to 1,000,000 in decimal digits, else nothing said.
    @Test(arguments: [
        (value: String?.none, capacity: Int?.none), ("64", 64), ("1", 1), ("1000000", 1_000_000),
        ("0", nil), ("1000001", nil), ("-4", nil), ("+4", nil), (" 4", nil), ("4.0", nil), ("", nil),
        ("99999999999999999999999", nil), ("sixty-four", nil),
    ])
    func aDeclaredCapacityIsOneToAMillionInDigits(value: String?, capacity: Int?) {
        let headers = value.map { ["Spool-Max-Concurrent-Requests": $0] } ?? [:]
        #expect(HTTPSink.declaredCapacity(of: UploadResponse(status: 200, headers: headers)) == capacity)
    }

    @Test func retryAfterIsReadInBothForms() {
        guard case .retry(let seconds) = classify(429, headers: ["Retry-After": "7"]) else { Issue.record(); return }
        #expect(seconds.retryAfter == .seconds(7))
        guard case .retry(let date) = classify(503, headers: ["retry-after": "Sun, 06 Nov 1994 08:50:37 GMT"]) else { Issue.record(); return }
        #expect(date.retryAfter == .seconds(60))
        guard case .retry(let garbage) = classify(503, headers: ["Retry-After": "later"]) else { Issue.record(); return }
        #expect(garbage.retryAfter == nil)
    }

    @Test func serverMessageIsTruncatedSanitisedAndKeptApart() throws {
        let long = "bad\u{1}event\n" + String(repeating: "x", count: 1000)
        guard case .rejected(let error) = classify(400, body: long) else { Issue.record(); return }
        #expect(error.status == 400)
        let server = try #require(error.serverMessage)
        #expect(server.hasPrefix("bad event x"))
        #expect(server.count == SyncError.maxServerMessageLength)
        // It may echo a payload: kept out of the message, the description and the logs.
        #expect(error.message == "the server refused the batch")
        #expect(!error.description.contains("bad"))
    }

    @Test func garbageBodiesNeverCrash() {
        let bytes: [UInt8] = [0xFF, 0xFE, 0x00, 0xC3, 0x28, 0xE2, 0x82]
        guard case .rejected(let error) = HTTPSink.outcome(
            of: UploadResponse(status: 400, body: bytes), retryableStatuses: [], now: 0) else { Issue.record(); return }
        #expect(!error.message.isEmpty)
    }

    @Test func transportErrorsAreRetried() {
        struct Reset: Error {}
        guard case .retry(let error) = SinkOutcome.failed(Reset()) else { Issue.record(); return }
        #expect(error.code == .network)
        #expect(error.cause is Reset)
    }
}
