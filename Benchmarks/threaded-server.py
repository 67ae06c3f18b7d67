#!/usr/bin/env python3
"""A threaded HTTP server with the standard library's 5-connection accept queue.

Python's `http.server.ThreadingHTTPServer` as people run it: `request_queue_size` 5 (the
listen backlog: the kernel drops SYNs past it and the client sends them again a second
later), a thread per connection, HTTP/1.0 (one request per connection), and no 429 or 503.
Every POST is read whole and answered 200 with an empty body. `GET /count` answers
`{"posts": P, "records": R}`: the POSTs received and the distinct record ids among them
(Spool's JSON envelopes), so a test can check that every record arrived; any other GET
answers 200 (a readiness probe).

    python3 Benchmarks/threaded-server.py PORT
"""
import json
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
posts = 0
ids = set()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        global posts
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            received = [envelope.get("id") for envelope in json.loads(body)]
        except (ValueError, AttributeError, TypeError):
            received = []
        with lock:
            posts += 1
            ids.update(received)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        if self.path == "/count":
            with lock:
                answer = json.dumps({"posts": posts, "records": len(ids)}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)
        else:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    def log_message(self, format, *args):
        pass


class Server(ThreadingHTTPServer):
    request_queue_size = 5


# Started by Foundation's `Process` from a Swift test or benchmark, this process inherits the
# blocked signals of the thread that started it (there: nearly all, SIGTERM among them), and
# Python keeps that mask: `terminate()` would never stop it. Unblock them all.
signal.pthread_sigmask(signal.SIG_SETMASK, set())
Server(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
