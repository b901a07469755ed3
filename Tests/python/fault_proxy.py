"""An HTTP proxy for tests that injects faults on the way to an S3 server.

usage: fault_proxy.py LISTEN_PORT UPSTREAM_URL FAULT_RATE COUNT_FILE [CORRUPT_GETS [log]]
With LISTEN_PORT 0 it binds a free port; it prints "listening on 127.0.0.1:PORT".
A FAULT_RATE fraction of requests (seeded, so runs repeat) is answered with
503 SlowDown, or has its connection reset before any answer. The first
CORRUPT_GETS successful GET bodies get one byte flipped (CORRUPT_GETS
written as N:later: only GETs of a range that does not start at byte 0,
the later ranges of a download). Headers pass
unchanged (the Host header too, so signatures stay valid). Each fault adds a
line to COUNT_FILE; with `log`, so does every forwarded request
("METHOD PATH STATUS"), for tests that count requests, and a line
"sse-c METHOD PATH name=md5 …" naming the SSE-C key MD5s a request carried,
"signed-by KEYID METHOD PATH" naming the access key id that signed it,
"checksums METHOD PATH name=value …" naming the x-amz-checksum-* headers of a
POST (a CompleteMultipartUpload's whole-object checksum), and
"aborted METHOD PATH RECEIVED/LENGTH" for a body the client cut short.
"""
import errno
import http.client
import random
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

from loopback_server import LoopbackServer

port, upstream, rate, count_file = int(sys.argv[1]), urlsplit(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
corrupt_spec = sys.argv[5] if len(sys.argv) > 5 else "0"
corrupt_left = [int(corrupt_spec.split(":")[0])]
corrupt_later_only = corrupt_spec.endswith(":later")
log_requests = len(sys.argv) > 6 and sys.argv[6] == "log"
rng = random.Random(7)
lock = threading.Lock()

SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
             b'<Message>Please reduce your request rate.</Message></Error>')


def record(kind):
    with lock, open(count_file, "a") as f:
        f.write(kind + "\n")


class Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        if body is not None and len(body) < length:
            # The client gave up mid-body (an aborted request): nothing is forwarded.
            if log_requests:
                record(f"aborted {self.command} {self.path} {len(body)}/{length}")
            self.close_connection = True
            return
        with lock:
            roll = rng.random()
        if roll < rate / 2:
            record("503")
            self.send_response(503)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(SLOW_DOWN)))
            self.end_headers()
            self.wfile.write(SLOW_DOWN)
            return
        if roll < rate:
            record("reset")
            # RST instead of FIN: the client sees "connection reset by peer".
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=60)
        headers = {k: v for k, v in self.headers.items()}
        conn.request(self.command, self.path, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        if log_requests:
            record(f"{self.command} {self.path} {response.status}")
            # SSE-C: which keys a request carried, by their MD5 (never the key itself).
            sse = {k.lower(): v for k, v in self.headers.items() if k.lower().endswith("server-side-encryption-customer-key-md5")}
            if sse:
                record("sse-c " + self.command + " " + self.path + " " + " ".join(f"{k}={v}" for k, v in sorted(sse.items())))
            sums = {k.lower(): v for k, v in self.headers.items() if k.lower().startswith("x-amz-checksum-")}
            if self.command == "POST" and sums:
                record("checksums " + self.command + " " + self.path + " " + " ".join(f"{k}={v}" for k, v in sorted(sums.items())))
            # Which access key signed it (the key id only).
            auth = self.headers.get("Authorization", "")
            if "Credential=" in auth:
                record("signed-by " + auth.split("Credential=", 1)[1].split("/", 1)[0] + " " + self.command + " " + self.path)
        later = not (self.headers.get("Range") or "bytes=0-").strip().lower().startswith("bytes=0-")
        if self.command == "GET" and response.status in (200, 206) and data and (later or not corrupt_later_only):
            with lock:
                corrupt = corrupt_left[0] > 0
                corrupt_left[0] -= 1 if corrupt else 0
            if corrupt:
                record("corrupt")
                data = bytes([data[0] ^ 0xFF]) + data[1:]
        self.send_response(response.status)
        for k, v in response.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        # A HEAD answer's length is the object's, not its (empty) body's.
        length = response.getheader("Content-Length", "0") if self.command == "HEAD" else str(len(data))
        self.send_header("Content-Length", length)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        conn.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any


def listen():
    # Started again on its old port, it may find the port held for a moment
    # (a client's socket on it while nothing listened): try for a while.
    deadline = time.monotonic() + 15
    while True:
        try:
            return LoopbackServer(port, Proxy)
        except OSError as error:
            if error.errno != errno.EADDRINUSE or port == 0 or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


listen().serve()
