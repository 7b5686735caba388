"""A static file server that paces what it sends, for timing the site on a slow link.

Chromium's network throttling (DevTools, CDP ``Network.emulateNetworkConditions``)
applies to the page, not to a dedicated web worker's fetches: the Pyodide worker
fetched its 13.8 MB in about a second under "Slow 4G" (issue 36, finding 10), so a
timing that relies on it under-reports. Throttling at the server holds for every
fetch whatever makes it: each response waits one round trip before its first byte,
and every byte sent by any connection draws on one shared budget of ``rate`` bytes a
second, as on one slow link.

    httpd = throttled_server(site, rate=SLOW_4G.rate, latency=SLOW_4G.latency)
    httpd.base          # "http://127.0.0.1:<port>"
    httpd.sent          # {path: body bytes sent}, as the browser's transferSize sees
    httpd.shutdown()

Like a static host, it gzips text types (HTML, JS, CSS, JSON, SVG, ...) when the
client accepts it (``compress=False`` turns that off), so the bytes counted are the
bytes a reader's browser would download.
"""

from __future__ import annotations

import functools
import gzip
import http.server
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple


class Profile(NamedTuple):
    """A link: ``rate`` in bytes per second (``None``: as fast as this machine
    goes), ``latency`` the seconds before each response's first byte (a round
    trip)."""

    name: str
    rate: float | None
    latency: float


UNTHROTTLED = Profile("unthrottled", None, 0.0)
#: Lighthouse's mobile "Slow 4G" (its simulated throttling, which DevTools' "Slow 4G"
#: preset follows): 1,638.4 kbit/s down, 150 ms round trip.
SLOW_4G = Profile("Slow 4G (1.6 Mbit/s, 150 ms RTT)", 1638.4 * 1000 / 8, 0.150)

#: Content types a static host compresses.
COMPRESSIBLE = (
    "text/",
    "application/javascript",
    "application/json",
    "application/xml",
    "image/svg+xml",
    "application/wasm",
)
CHUNK = 16 * 1024


class Pacer:
    """One budget of ``rate`` bytes a second shared by every connection: each chunk
    books the next free slot on one timeline and its writer sleeps until the slot
    ends, so two parallel downloads each get half the rate."""

    def __init__(self, rate: float | None):
        if rate is not None and not rate > 0:
            raise ValueError(
                f"rate: must be a positive number of bytes/s, not {rate!r}"
            )
        self.rate = rate
        self._free_at = 0.0
        self._lock = threading.Lock()

    def wait(self, size: int) -> None:
        """Block until ``size`` more bytes may be sent."""
        if self.rate is None:
            return
        with self._lock:
            start = max(time.monotonic(), self._free_at)
            self._free_at = start + size / self.rate
            done = self._free_at
        delay = done - time.monotonic()
        if delay > 0:
            time.sleep(delay)


class ThrottledHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files from ``directory`` through the server's `Pacer`, after its
    latency, gzipped where a static host would gzip; counts the body bytes sent."""

    protocol_version = "HTTP/1.1"  # keep-alive, as browsers and hosts use

    def do_GET(self):
        time.sleep(self.server.latency)
        if self.path == "/favicon.ico":  # Chromium asks any server for one
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path = Path(self.translate_path(self.path))
        if path.is_dir():
            path = path / "index.html"
        if not path.is_file():
            self.send_error(404)
            return
        ctype = self.guess_type(str(path))
        body = self.server.body(path)
        accepts = "gzip" in self.headers.get("Accept-Encoding", "")
        encoded = self.server.compress and accepts and ctype.startswith(COMPRESSIBLE)
        if encoded:
            body = self.server.gzipped(path, body)
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if encoded:
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Cache-Control", "max-age=600")  # a static host's caching
        self.send_header("Last-Modified", self.date_time_string(path.stat().st_mtime))
        self.end_headers()
        view, name = memoryview(body), self.path.split("?", 1)[0]
        for start in range(0, len(body), CHUNK):
            chunk = view[start : start + CHUNK]
            self.server.pacer.wait(len(chunk))
            self.server.count(name, len(chunk))  # before the client can have it
            self.wfile.write(chunk)

    def log_message(self, *args):
        pass


class ThrottledServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, site: Path, rate, latency, compress):
        handler = functools.partial(ThrottledHandler, directory=str(site))
        super().__init__(("127.0.0.1", 0), handler)
        self.pacer = Pacer(rate)
        self.latency = latency
        self.compress = compress
        self.sent: dict[str, int] = {}
        self._lock = threading.Lock()
        self._gz: dict[Path, bytes] = {}
        self.base = f"http://127.0.0.1:{self.server_port}"

    @staticmethod
    @functools.lru_cache(maxsize=512)
    def _read(path: Path) -> bytes:
        return path.read_bytes()

    def body(self, path: Path) -> bytes:
        return self._read(path)

    def gzipped(self, path: Path, body: bytes) -> bytes:
        with self._lock:
            found = self._gz.get(path)
        if found is None:
            found = gzip.compress(body, compresslevel=6, mtime=0)
            with self._lock:
                self._gz[path] = found
        return found

    def handle_error(self, request, client_address) -> None:
        """A download the browser gave up (the runtime's worker drops a snapshot that
        comes too slowly) is no error of the server's; anything else is printed."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def count(self, path: str, size: int) -> None:
        with self._lock:
            self.sent[path] = self.sent.get(path, 0) + size

    def take_sent(self) -> dict[str, int]:
        """The bytes sent per path since the last call, and start counting again."""
        with self._lock:
            sent, self.sent = self.sent, {}
        return sent


def throttled_server(
    site: Path,
    rate: float | None = None,
    latency: float = 0.0,
    compress: bool = True,
) -> ThrottledServer:
    """Serve ``site`` on http://127.0.0.1:<free port> from a thread, every body
    paced to ``rate`` bytes/s in all (``None``: unpaced) after ``latency`` seconds.

    Raises ValueError if ``rate`` is not positive or ``latency`` is negative."""
    if latency < 0:
        raise ValueError(f"latency: must be >= 0 seconds, not {latency!r}")
    httpd = ThrottledServer(Path(site), rate, latency, compress)
    threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    return httpd
