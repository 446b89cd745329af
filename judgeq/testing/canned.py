"""A server on loopback answering every request with one canned response: a proxy's login page,
a wrong port's HTML, a gateway's completion with its own headers. For tests of what judgeq does
with answers the real services never give (the stand-ins in this package model the services)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

__all__ = ["canned_server"]


@contextmanager
def canned_server(
    body: bytes, content_type: str = "text/html", headers: Mapping[str, str] | None = None, status: int = 200
) -> Iterator[str]:
    """Serve ``body`` (with ``headers``) to every GET and POST on 127.0.0.1; yields the base URL
    (``http://127.0.0.1:PORT``). The request's body is read and dropped."""

    class Canned(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Canned)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
