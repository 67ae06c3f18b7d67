import CSQLite
import BenchScenarios

/// The Sensors Analytics SDK's store, as the baseline: one SQLite database in WAL mode
/// with `events(id INTEGER PRIMARY KEY AUTOINCREMENT, json TEXT)`; appends insert one row
/// per event; a flush selects the 50 oldest, builds the JSON array body and deletes them.
package struct SQLiteBaseline: Baseline {
    package let name = "SQLite"

    package init() {}

    package func append(_ mode: BaselineAppend, events: EventSet, directory: String, budget: Budget) throws -> Run {
        let db = try Database(path: directory + "/events.db", synchronous: mode == .full ? "FULL" : mode == .normal ? "NORMAL" : "OFF")
        let insert = try db.prepare("INSERT INTO events(json) VALUES(?)")
        let perTransaction = mode == .offBatch100 ? 100 : 1
        var nanos = [UInt64]()
        nanos.reserveCapacity(budget.events / perTransaction + 1)
        let start = monotonicNanos()
        let deadline = budget.deadline(from: start)
        var count = 0
        while count < budget.events {
            let t0 = monotonicNanos()
            if perTransaction > 1 { try db.execute("BEGIN") }
            for _ in 0..<min(perTransaction, budget.events - count) {
                try insert.run(text: events[cycling: count])
                count += 1
            }
            if perTransaction > 1 { try db.execute("COMMIT") }
            let t1 = monotonicNanos()
            nanos.append(t1 - t0)
            if t1 > deadline { break }
        }
        insert.finalize()
        try db.close()
        // Per-call latency only means something for one event per call.
        return Run(count: count, nanos: monotonicNanos() - start, latencies: perTransaction == 1 ? Latencies(nanos: nanos) : nil)
    }

    package func trickle(events: EventSet, count: Int, directory: String) throws -> TrickleBytes {
        let path = directory + "/events.db"
        try Database(path: path, synchronous: "NORMAL").close()
        let empty = bytesOnDisk(directory)
        let db = try Database(path: path, synchronous: "NORMAL")
        let insert = try db.prepare("INSERT INTO events(json) VALUES(?)")
        for index in 0..<count {
            try insert.run(text: events[cycling: index])
        }
        let open = bytesOnDisk(directory)
        insert.finalize()
        try db.close()
        let closed = bytesOnDisk(directory)
        return TrickleBytes(perEvent: Double(closed - empty) / Double(count), perEventWhileOpen: Double(open - empty) / Double(count))
    }

    package func drain(_ mode: BaselineDrain, batch: Int, events: EventSet, count: Int, directory: String) throws -> (run: Run, bytes: Int) {
        let path = directory + "/events.db"
        do {
            let db = try Database(path: path, synchronous: "OFF")
            let insert = try db.prepare("INSERT INTO events(json) VALUES(?)")
            var index = 0
            while index < count {
                try db.execute("BEGIN")
                for _ in 0..<min(1000, count - index) {
                    try insert.run(text: events[cycling: index])
                    index += 1
                }
                try db.execute("COMMIT")
            }
            insert.finalize()
            try db.close()
        }
        let bytes = bytesOnDisk(directory)

        let start = monotonicNanos()
        let db = try Database(path: path, synchronous: mode == .full ? "FULL" : "OFF")
        let select = try db.prepare("SELECT id, json FROM events ORDER BY id ASC LIMIT \(batch)")
        let delete = try db.prepare("DELETE FROM events WHERE id <= ?")
        var drained = 0
        var bodyBytes = 0
        while true {
            var payloads = [[UInt8]]()
            payloads.reserveCapacity(batch)
            var lastID: Int64 = 0
            try select.rows { statement in
                lastID = sqlite3_column_int64(statement, 0)
                let length = Int(sqlite3_column_bytes(statement, 1))
                let text = sqlite3_column_text(statement, 1)!
                payloads.append(Array(UnsafeBufferPointer(start: text, count: length)))
            }
            if payloads.isEmpty { break }
            bodyBytes += jsonArrayBody(payloads).count
            try delete.run(int: lastID)
            drained += payloads.count
        }
        select.finalize()
        delete.finalize()
        try db.close()
        precondition(drained == count && bodyBytes > 0, "the SQLite drain read \(drained) of \(count) events")
        return (Run(count: drained, nanos: monotonicNanos() - start), bytes)
    }
}
