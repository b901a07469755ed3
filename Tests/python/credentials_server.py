"""A loopback server for Ferry's credential providers, following AWS's
documented protocols: EC2 instance metadata v2 (PUT /latest/api/token with a
TTL header, then the role name and its credentials with the session token) and
the container credentials endpoint (GET with the Authorization token).

usage: credentials_server.py PORT LIFETIME_SECONDS AUTH_TOKEN COUNT_FILE [CLOCK_OFFSET_SECONDS]
Every credentials document carries a new AccessKeyId (ASIATEST0001, …) and
expires LIFETIME_SECONDS after it is issued; each issue appends its key id to
COUNT_FILE. Requests without the IMDSv2 token or the authorization token get 401.
CLOCK_OFFSET_SECONDS puts the server's clock (its Date headers and the
expiry it writes) that far from the machine's, as a source whose clock is off.
"""
import datetime
import email.utils
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler

from loopback_server import LoopbackServer

port, lifetime, auth_token, count_file = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
clock_offset = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
lock = threading.Lock()
state = {"issued": 0, "tokens": set()}
ROLE = "ferry-role"


def credentials(token_field):
    with lock:
        state["issued"] += 1
        key = "ASIATEST%04d" % state["issued"]
        with open(count_file, "a") as f:
            f.write(key + "\n")
    expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=clock_offset + lifetime)
    return {"Code": "Success", "AccessKeyId": key, "SecretAccessKey": "secret-" + key, token_field: "session-" + key,
            "Expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def date_time_string(self, timestamp=None):
        return email.utils.formatdate(time.time() + clock_offset, usegmt=True)

    def answer(self, status, body, content_type="text/plain"):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self):
        if self.path == "/latest/api/token" and self.headers.get("x-aws-ec2-metadata-token-ttl-seconds"):
            with lock:
                token = "imds-%d" % (len(state["tokens"]) + 1)
                state["tokens"].add(token)
            return self.answer(200, token)
        self.answer(400, "token PUT needs x-aws-ec2-metadata-token-ttl-seconds")

    def do_GET(self):
        if self.path.startswith("/latest/meta-data/"):
            if self.headers.get("x-aws-ec2-metadata-token") not in state["tokens"]:
                return self.answer(401, "IMDSv2 session token required")
            if self.path == "/latest/meta-data/iam/security-credentials/":
                return self.answer(200, ROLE)
            if self.path == "/latest/meta-data/iam/security-credentials/" + ROLE:
                return self.answer(200, json.dumps(credentials("Token")), "application/json")
            return self.answer(404, "not found")
        if self.path == "/container/credentials":
            if self.headers.get("Authorization") != auth_token:
                return self.answer(401, "wrong authorization token")
            return self.answer(200, json.dumps(credentials("Token")), "application/json")
        self.answer(404, "not found")


server = LoopbackServer(port, Handler)
server.serve()
