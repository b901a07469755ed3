#!/usr/bin/env python3
"""A loopback TCP proxy that delays everything a client sends by a fixed time
(default 50 ms) before the server sees it; answers pass straight back. Each
request to the server so starts at least that much later, as over a long link,
which makes a benchmark latency-bound instead of CPU-bound.

    latency_proxy.py LISTEN_PORT TARGET_HOST TARGET_PORT [DELAY_MS]
Prints "listening on PORT" once it accepts connections.
"""
import asyncio
import sys
import time


async def delayed_pipe(reader, writer, delay):
    """Forwards each chunk `delay` seconds after it arrived, in order."""
    queue = asyncio.Queue()

    async def receive():
        while True:
            data = await reader.read(1 << 16)
            queue.put_nowait((time.monotonic() + delay, data))
            if not data:
                return

    receiver = asyncio.ensure_future(receive())
    try:
        while True:
            due, data = await queue.get()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                writer.write_eof()
                return
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        receiver.cancel()


async def pipe(reader, writer):
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
        writer.write_eof()
    except (ConnectionError, OSError):
        pass


async def main():
    listen, host, port = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    delay = (float(sys.argv[4]) if len(sys.argv) > 4 else 50.0) / 1000

    async def handle(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection(host, port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(delayed_pipe(client_reader, server_writer, delay), pipe(server_reader, client_writer))
        for w in (client_writer, server_writer):
            w.close()

    server = await asyncio.start_server(handle, "127.0.0.1", listen, backlog=512)
    print(f"listening on {listen}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
