"""A plain HTTP server for source tests: serves files from a directory, and
/redirect?to=URL answers 302 to URL. Every request path is appended to LOG.

usage: source_server.py PORT DIRECTORY LOG
"""
import os
import sys
from http.server import BaseHTTPRequestHandler

from loopback_server import LoopbackServer
from urllib.parse import parse_qs, urlsplit

port, root, log = int(sys.argv[1]), sys.argv[2], sys.argv[3]


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        with open(log, "a") as f:
            f.write(self.path + "\n")
        parts = urlsplit(self.path)
        if parts.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", parse_qs(parts.query)["to"][0])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path = os.path.join(root, parts.path.lstrip("/"))
        if not os.path.isfile(path):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        with open(path, "rb") as f:
            data = f.read()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


server = LoopbackServer(port, Handler)
server.serve()
