import Foundation

/// nginx in front of collectors on 127.0.0.1, as issue #28's fleet runs it (the fleet tests,
/// the benchmark's fleet): Debian's binary with a configuration of its own in a directory of
/// the caller's (README's example without TLS), in the foreground, stopped by its pid.
///
/// If it cannot start, ``init(directory:upstreams:)`` throws the reason (nginx's own words):
/// a test that needs it fails, it is never skipped. `scripts/setup` installs it.
///
/// Thread-safety: `stop()` may be called from any thread (it signals a pid and waits).
package final class Nginx: @unchecked Sendable {
    /// The port it listens on, on 127.0.0.1.
    package let port: Int
    /// Where its configuration, pid file, temporary files and logs are.
    package let directory: String
    private let process: Process

    /// `http://127.0.0.1:<port>/batch`: where devices send.
    package var url: String { "http://127.0.0.1:\(port)/batch" }

    /// The nginx binary: on PATH, or Debian's /usr/sbin/nginx.
    package static var binary: String? {
        let candidates = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { "\($0)/nginx" } + ["/usr/sbin/nginx"]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Starts nginx on a free port of 127.0.0.1, proxying to collectors on `upstreams` (ports
    /// of 127.0.0.1), and waits (blocking) until it proxies `GET /healthz` to one of them with
    /// a 200.
    ///
    /// - Parameters:
    ///   - maxBody: `client_max_body_size`: nginx answers larger requests 413 itself, with its
    ///     own HTML page, before any collector sees them.
    ///   - readTimeout: `proxy_read_timeout`: a collector that does not answer within it is a
    ///     504 (or the next collector).
    package init(directory: String, upstreams: [Int], maxBody: String = "16m", readTimeout: String = "30s") throws {
        guard let binary = Self.binary else { throw ServerError("nginx is not installed (scripts/setup installs nginx-light)") }
        let port = try freePort()
        self.port = port
        self.directory = directory
        let configuration = directory + "/nginx.conf"
        try Self.configuration(directory: directory, port: port, upstreams: upstreams, maxBody: maxBody, readTimeout: readTimeout)
            .write(toFile: configuration, atomically: true, encoding: .utf8)
        process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["-p", directory, "-c", configuration, "-e", directory + "/nginx-error.log", "-g", "daemon off;"]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        _ = FileManager.default.createFile(atPath: directory + "/nginx.stderr", contents: nil)
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: directory + "/nginx.stderr"))
        try process.run()
        for _ in 0..<100 {
            if !process.isRunning { break }
            if (try? HTTP.requestBlocking("GET", "http://127.0.0.1:\(port)/healthz", body: nil))?.status == 200 { return }
            usleep(50_000)
        }
        let reason = [directory + "/nginx.stderr", directory + "/nginx-error.log"]
            .compactMap { try? String(contentsOfFile: $0, encoding: .utf8) }.joined(separator: "\n")
        stop()
        throw ServerError("nginx did not start or did not proxy /healthz: \(reason)")
    }

    /// Stops it (SIGQUIT: a graceful stop) and waits for it to exit.
    package func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGQUIT)
            process.waitUntilExit()
        }
    }

    /// The configuration: README's fleet example without TLS, every path inside `directory`.
    /// A collector is out for a second after a failed request; a request that fails, times out
    /// or is answered 502 or 503 moves to the next collector, a `POST` too (a batch is safe
    /// to send twice: its records carry their ids).
    static func configuration(directory: String, port: Int, upstreams: [Int], maxBody: String, readTimeout: String) -> String {
        """
        \(getuid() == 0 ? "user root;" : "")
        worker_processes 1;
        pid \(directory)/nginx.pid;
        error_log \(directory)/nginx-error.log warn;
        events { worker_connections 1024; }
        http {
            access_log off;
            client_body_temp_path \(directory)/body;
            proxy_temp_path \(directory)/proxy;
            fastcgi_temp_path \(directory)/fastcgi;
            uwsgi_temp_path \(directory)/uwsgi;
            scgi_temp_path \(directory)/scgi;
            client_max_body_size \(maxBody);
            client_body_buffer_size 1m;
            upstream collectors {
        \(upstreams.map { "        server 127.0.0.1:\($0) max_fails=1 fail_timeout=1s;" }.joined(separator: "\n"))
                keepalive 16;
                keepalive_timeout 5s;  # below the collectors' headerTimeout (10 s), when they close idle connections
            }
            server {
                listen 127.0.0.1:\(port);
                location / {
                    proxy_pass http://collectors;
                    proxy_http_version 1.1;
                    proxy_set_header Connection "";
                    proxy_next_upstream error timeout http_502 http_503 non_idempotent;
                    proxy_next_upstream_tries 3;
                    proxy_connect_timeout 1s;
                    proxy_read_timeout \(readTimeout);
                }
            }
        }
        """
    }
}
