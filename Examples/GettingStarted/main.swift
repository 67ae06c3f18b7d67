// The README's embedding example, whole: open a log, append two events, ship them to a
// collector. ReadmeExampleTests runs it against `spool collector` and checks that the README
// shows this code.
//
// In one terminal: swift run spool collector --port 8080 --out /tmp/received.ndjson
// In another:      swift run GettingStarted [URL [DIRECTORY]]
// The log (in $TMPDIR/getting-started-events by default) outlives each run: run it twice, and
// the second run sends its own events and anything the first could not deliver.
import Foundation
import Spool
import SpoolSync

// What an app would have: its log's directory, the collector's URL and a token.
let arguments = CommandLine.arguments.dropFirst()
let collector = URL(string: arguments.first ?? "http://127.0.0.1:8080/batch")!
let directory = arguments.dropFirst().first ?? NSTemporaryDirectory() + "getting-started-events"
let token = "a token of yours"

// README: from here to the end.
let log = try EventLog.open(directory: directory)                     // 0700, locked, recovered
try log.append(json: ["event": "screen_view", "screen": "home"])      // buffered: no syscall
let seq = try await log.append(Array(#"{"event":"purchase"}"#.utf8), durability: .synced)  // once fdatasync'd

var sync = SyncConfiguration()                                        // 100 / 15 s / 50 per request
sync.http.headers["Authorization"] = "Bearer \(token)"
let worker = try SyncWorker(consumer: try log.consumer(named: "uploader"), url: collector, configuration: sync)
await worker.start()                                                  // sends last run's leftovers too

// App entering the background: no new request past the budget, no half-committed offset.
await worker.pause()
let report = await worker.flush(within: .seconds(25))
if let failure = report.failure { print("not delivered yet: \(failure)") }
print("record \(seq) is durable; \(await worker.stats.records) records sent")
// Done for good:
await worker.stop()
try log.close()
