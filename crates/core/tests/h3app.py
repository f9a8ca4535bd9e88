"""The ASGI app the core's HTTP/3 tests run under aioquic's example server
(examples/http3_server.py, installed by scripts/h3-server.sh; see crates/core/src/h3/tests.rs).

Routes:
  /echo...       any method: 200, the request body as the response body, and what the server
                 saw of the request as fields: x-method, x-path (with the query), and each
                 request field as x-seen-<name> (values of a repeated one joined by ", ").
  /bytes/N       N bytes (a repeating pattern of the 26 lowercase letters), content-length N,
                 sent in pieces of at most 64 KiB.
  /close         closes the whole QUIC connection with H3_INTERNAL_ERROR before answering:
                 a peer that goes away under its requests.
  CONNECT        (any target) 200, then a tunnel that echoes what comes through it, and ends
                 when its client's side does.
  /slow-headers/MS  200 and "late", MS milliseconds after the request ended.
  /slow-body/MS  200 at once with "first", then "last" MS milliseconds later.
  /trailers      200, "with trailers", then a trailer section x-t: done. The example server
                 ignores ASGI's http.response.trailers, so the app writes the trailing HEADERS
                 frame itself, as /close reaches the connection.
  /redirect...   302 to /echo/redirected (content-length 0).
  /flaky...      503 the first time a path is asked for, 200 "recovered" after.
  anything else  404.

Where the environment names a file in H3APP_LOG, each request's method and path (with the
query) is appended to it as one line when the request arrives: the __test__ suites count
requests with it.
"""

import asyncio
import os
import string

PATTERN = string.ascii_lowercase.encode()
H3_INTERNAL_ERROR = 0x102
LOG = os.environ.get("H3APP_LOG")
SEEN = {}


def log(scope):
    if LOG:
        with open(LOG, "a") as f:
            f.write(scope["method"] + " " + scope["raw_path"].decode("latin-1") + "\n")


async def read_body(receive):
    # Pieces joined once at the end: `body += piece` would copy the body so far for each
    # QUIC packet's worth, quadratic in its size (seconds for a few MiB).
    pieces = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(pieces)
        pieces.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(pieces)


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    log(scope)
    if scope["method"] == "CONNECT":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return
            more = message.get("more_body", False)
            await send({"type": "http.response.body", "body": message.get("body", b""), "more_body": more})
            if not more:
                return
    path = scope["path"]
    SEEN[scope["raw_path"]] = SEEN.get(scope["raw_path"], 0) + 1
    body = await read_body(receive)
    if path.startswith("/echo"):
        raw = scope["raw_path"]
        seen = {}
        for name, value in scope["headers"]:
            seen.setdefault(name.lower(), []).append(value)
        headers = [
            (b"x-method", scope["method"].encode()),
            (b"x-path", raw),
            (b"content-length", str(len(body)).encode()),
        ]
        headers += [(b"x-seen-" + name, b", ".join(values)) for name, values in seen.items()]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
    elif path.startswith("/bytes/"):
        n = int(path[len("/bytes/"):])
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-length", str(n).encode())],
            }
        )
        sent = 0
        while sent < n:
            size = min(65536, n - sent)
            piece = (PATTERN * (size // len(PATTERN) + 2))[sent % len(PATTERN):][:size]
            sent += size
            await send({"type": "http.response.body", "body": piece, "more_body": sent < n})
        if n == 0:
            await send({"type": "http.response.body", "body": b""})
    elif path == "/close":
        # The example server hands the app its handler's bound `send`; the handler knows the
        # QUIC connection's protocol object.
        protocol = send.__self__.protocol
        protocol.close(error_code=H3_INTERNAL_ERROR, reason_phrase="closed by the test app")
    elif path.startswith("/slow-headers/"):
        await asyncio.sleep(int(path[len("/slow-headers/"):]) / 1000)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"late"})
    elif path.startswith("/slow-body/"):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"first", "more_body": True})
        await asyncio.sleep(int(path[len("/slow-body/"):]) / 1000)
        await send({"type": "http.response.body", "body": b"last"})
    elif path == "/trailers":
        handler = send.__self__
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"with trailers", "more_body": True})
        handler.connection.send_headers(
            stream_id=handler.stream_id, headers=[(b"x-t", b"done")], end_stream=True
        )
        handler.transmit()
    elif path.startswith("/redirect"):
        headers = [(b"location", b"/echo/redirected"), (b"content-length", b"0")]
        await send({"type": "http.response.start", "status": 302, "headers": headers})
        await send({"type": "http.response.body", "body": b""})
    elif path.startswith("/flaky"):
        first = SEEN[scope["raw_path"]] == 1
        body = b"" if first else b"recovered"
        headers = [(b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 503 if first else 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
    else:
        await send(
            {"type": "http.response.start", "status": 404, "headers": [(b"content-length", b"0")]}
        )
        await send({"type": "http.response.body", "body": b""})
