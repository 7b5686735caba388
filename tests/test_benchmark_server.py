"""The benchmark's throttled server (tests/benchmarks/throttle.py) really paces what it
sends, to any client: Python's urllib, and a web worker in Chromium, whose fetches
Chromium's own network throttling leaves alone (issue 36, finding 10)."""

from __future__ import annotations

import gzip
import os
import threading
import time
import urllib.request

import pytest

from tests.benchmarks.throttle import throttled_server

MB = 1_000_000
RATE = 2 * MB  # bytes/s: 1 MB takes 0.5 s


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    folder = tmp_path_factory.mktemp("throttled-site")
    (folder / "one.bin").write_bytes(os.urandom(MB))  # incompressible
    (folder / "half.bin").write_bytes(os.urandom(MB // 2))
    (folder / "small.txt").write_text("x" * 100_000)
    (folder / "worker.js").write_text(
        "onmessage = async (e) => {\n"
        "  const t = performance.now();\n"
        "  const response = await fetch(e.data, {cache: 'no-store'});\n"
        "  const body = await response.arrayBuffer();\n"
        "  postMessage([body.byteLength, (performance.now() - t) / 1000]);\n"
        "};\n"
    )
    (folder / "index.html").write_text("<!doctype html><title>worker</title>")
    return folder


def fetch(url: str, gz: bool = False) -> tuple[bytes, float, dict]:
    request = urllib.request.Request(
        url, headers={"Accept-Encoding": "gzip"} if gz else {}
    )
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read()
        headers = dict(response.headers)
    return body, time.perf_counter() - start, headers


def test_one_megabyte_at_two_megabytes_a_second_takes_half_a_second(site):
    httpd = throttled_server(site, rate=RATE)
    try:
        body, seconds, _ = fetch(f"{httpd.base}/one.bin")
        assert body == (site / "one.bin").read_bytes()
        assert 0.45 <= seconds < 2.0
        assert httpd.take_sent() == {"/one.bin": MB}
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_unthrottled_it_is_fast_and_the_latency_delays_the_first_byte(site):
    fast = throttled_server(site)
    slow = throttled_server(site, latency=0.3)
    try:
        assert fetch(f"{fast.base}/one.bin")[1] < 0.3
        assert fetch(f"{slow.base}/index.html")[1] >= 0.29
    finally:
        for httpd in (fast, slow):
            httpd.shutdown()
            httpd.server_close()


def test_parallel_downloads_share_one_budget(site):
    """Two 0.5 MB downloads at once on a 2 MB/s link: 0.5 s for both, not 0.25."""
    httpd = throttled_server(site, rate=RATE)
    times = []
    try:
        start = time.perf_counter()
        threads = [
            threading.Thread(
                target=lambda: times.append(fetch(f"{httpd.base}/half.bin"))
            )
            for _ in range(2)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert time.perf_counter() - start >= 0.45
        assert max(seconds for _, seconds, _ in times) >= 0.45
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_text_is_gzipped_when_accepted_and_the_wire_bytes_are_counted(site):
    httpd = throttled_server(site)
    try:
        body, _, headers = fetch(f"{httpd.base}/small.txt", gz=True)
        assert headers["Content-Encoding"] == "gzip"
        assert gzip.decompress(body) == b"x" * 100_000
        assert httpd.take_sent() == {"/small.txt": len(body)}
        plain, _, headers = fetch(f"{httpd.base}/small.txt")
        assert "Content-Encoding" not in headers and len(plain) == 100_000
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_web_workers_fetch_is_paced_too(site, tmp_path):
    """The case CDP throttling misses: a dedicated worker's fetch in Chromium."""
    from tests.test_browser import chromium  # skips where Chromium is missing

    httpd = throttled_server(site, rate=RATE)
    driver = chromium(tmp_path / "profile")
    try:
        driver.get(f"{httpd.base}/index.html")
        size, seconds = driver.execute_async_script(
            "const done = arguments[arguments.length - 1];\n"
            "const worker = new Worker('worker.js');\n"
            "worker.onmessage = (e) => done(e.data);\n"
            "worker.postMessage('one.bin');\n"
        )
        assert size == MB
        assert 0.45 <= seconds < 3.0
    finally:
        driver.quit()
        httpd.shutdown()
        httpd.server_close()
