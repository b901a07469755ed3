"""A webhook receiver for trigger tests: appends each POST as one JSON line
({"path", "headers", "body"}) to LOG and answers with the next status of
STATUSES (comma-separated, the last one repeats) and BODY (may be empty).

usage: webhook_server.py PORT LOG STATUSES [BODY] [--tls CERT KEY]
With --tls it serves HTTPS with that certificate.
"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler

from loopback_server import LoopbackServer

args = sys.argv[1:]
tls = None
if "--tls" in args:
    at = args.index("--tls")
    tls = (args[at + 1], args[at + 2])
    args = args[:at] + args[at + 3:]
port, log, statuses = int(args[0]), args[1], [int(s) for s in args[2].split(",")]
reply = args[3].encode() if len(args) > 3 else b""
lock = threading.Lock()
count = [0]


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):  # readiness probe
        self.send_response(204)
        self.end_headers()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with lock:
            status = statuses[min(count[0], len(statuses) - 1)]
            count[0] += 1
            with open(log, "a") as f:
                f.write(json.dumps({"path": self.path, "headers": dict(self.headers), "body": body.decode()}) + "\n")
        payload = reply if 200 <= status < 300 else b"refused"
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


server = LoopbackServer(port, Handler)
if tls:
    import ssl
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tls[0], tls[1])
    server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve()
