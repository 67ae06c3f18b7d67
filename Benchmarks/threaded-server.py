#!/usr/bin/env python3
"""A threaded HTTP server with the standard library's 5-connection accept queue.

Python's `http.server.ThreadingHTTPServer` as people run it: `request_queue_size` 5 (the
listen backlog: the kernel drops SYNs past it and the client sends them again a second
later), a thread per connection, HTTP/1.0 (one request per connection), and no 429 or 503.
Every POST is read whole and answered 200; a GET answers 200 (a readiness probe).

    python3 Benchmarks/threaded-server.py PORT
"""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        self.do_POST()

    def log_message(self, format, *args):
        pass


class Server(ThreadingHTTPServer):
    request_queue_size = 5


Server(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
