"""How the tests' Python servers listen: on 127.0.0.1, announcing the port.

Port 0 (a free port the kernel picks) goes without SO_REUSEADDR, so it is
never a port another socket still holds: a stopped Kafka mock broker keeps its
port bound, and aborts the test process if it cannot listen there again
(BrokerDownUpTests). A fixed port (a server started again where its clients
expect it) keeps SO_REUSEADDR, to bind past TIME_WAIT. `serve` prints
"listening on 127.0.0.1:PORT", which the tests read.
"""
from http.server import ThreadingHTTPServer


class LoopbackServer(ThreadingHTTPServer):
    def __init__(self, port, handler):
        self.allow_reuse_address = port != 0
        super().__init__(("127.0.0.1", port), handler)

    def serve(self):
        print(f"listening on 127.0.0.1:{self.server_address[1]}", flush=True)
        self.serve_forever()
