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
  anything else  404.
"""

import string

PATTERN = string.ascii_lowercase.encode()
H3_INTERNAL_ERROR = 0x102


async def read_body(receive):
    body = b""
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return body
        body += message.get("body", b"")
        if not message.get("more_body", False):
            return body


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
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
    else:
        await send(
            {"type": "http.response.start", "status": 404, "headers": [(b"content-length", b"0")]}
        )
        await send({"type": "http.response.body", "body": b""})
