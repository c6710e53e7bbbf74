#!/usr/bin/env python3
"""Drives Debian's headless Chromium over the DevTools protocol (a
WebSocket on loopback; Python's standard library only) for the dashboard's
tests: loads a page, watches every request it makes, evaluates checks in
it and takes a screenshot.

  browser.py URL [--screenshot F.png] [--has CHART] [--grow CHART] [--then CMD] [--state RUN:RANK=STATE]
             [--timeout S] [--chromium PATH] [--size WxH]

--has CHART: waits until the card #chart-CHART shows points.
--grow CHART: waits until the card #chart-CHART shows points, then until
  it shows more (the charts gained points while the run trained).
--then CMD: a shell command run between the two (e.g. killing a rank).
--state RUN:RANK=STATE: waits until the cluster table of RUN shows rank
  RANK in STATE (e.g. lost).
Every wait is bounded by --timeout.  Fails (exit 1, saying why) when a
wait runs out, when the page logs a JavaScript error, or when any request
of the page goes anywhere but the server it came from.  Prints what it saw.
"""
import argparse
import base64
import json
import os
import re
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request


class WebSocket:
    """A client WebSocket (RFC 6455) enough for the DevTools protocol."""

    def __init__(self, url, timeout):
        u = urllib.parse.urlparse(url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {u.path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
                          .encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise RuntimeError("DevTools closed the WebSocket handshake")
            head += chunk
        head, self.buf = head.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise RuntimeError("DevTools refused the WebSocket: " + head.decode(errors="replace"))

    def send(self, text):
        data = text.encode()
        mask = os.urandom(4)
        n = len(data)
        header = bytes([0x81])
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _read(self, n, deadline):
        while len(self.buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self.sock], [], [], left)
            if not ready:
                raise TimeoutError
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError("DevTools closed the WebSocket")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self, deadline):
        """One message's text, or TimeoutError past deadline."""
        parts = []
        while True:
            b0, b1 = self._read(2, deadline)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2, deadline))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8, deadline))[0]
            payload = self._read(n, deadline)
            opcode = b0 & 0x0F
            if opcode == 8:
                raise RuntimeError("DevTools closed the WebSocket")
            if opcode in (9, 10):
                continue
            parts.append(payload)
            if b0 & 0x80:
                return b"".join(parts).decode()


class Page:
    def __init__(self, ws):
        self.ws = ws
        self.next_id = 0
        self.requests = []
        self.errors = []

    def _event(self, m):
        method = m.get("method")
        if method == "Network.requestWillBeSent":
            self.requests.append(m["params"]["request"]["url"])
        elif method == "Runtime.exceptionThrown":
            d = m["params"]["exceptionDetails"]
            self.errors.append(d.get("exception", {}).get("description") or d.get("text"))
        elif method == "Log.entryAdded" and m["params"]["entry"]["level"] == "error":
            self.errors.append(m["params"]["entry"].get("text", "") + " " + m["params"]["entry"].get("url", ""))

    def call(self, method, params=None, timeout=30):
        self.next_id += 1
        mid = self.next_id
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout
        while True:
            m = json.loads(self.ws.recv(deadline))
            if m.get("id") == mid:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self._event(m)

    def pump(self, seconds):
        deadline = time.monotonic() + seconds
        try:
            while True:
                self._event(json.loads(self.ws.recv(deadline)))
        except TimeoutError:
            pass

    def eval(self, expression):
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        return r.get("result", {}).get("value")


def start_chromium(path, size, profile):
    args = [path, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", f"--user-data-dir={profile}",
            "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
            "--disable-component-update", "--disable-default-apps", "--disable-extensions", "--disable-sync",
            "--metrics-recording-only", "--disable-features=MediaRouter,OptimizationHints,Translate",
            # any name but loopback's fails to resolve: nothing could leave this machine even if asked
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
            f"--window-size={size}", "about:blank"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    port = None
    while time.monotonic() < deadline and port is None:
        ready, _, _ = select.select([proc.stderr], [], [], max(0.1, deadline - time.monotonic()))
        if not ready:
            break
        line = proc.stderr.readline()
        if not line:
            break
        m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
        if m:
            port = int(m.group(1))
    if port is None:
        proc.kill()
        raise RuntimeError("chromium did not say where DevTools listens within 60 s")
    return proc, port


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--screenshot")
    ap.add_argument("--grow", action="append", default=[])
    ap.add_argument("--has", action="append", default=[])
    ap.add_argument("--state", action="append", default=[])
    ap.add_argument("--then", help="a shell command run after the --grow checks, before the --state ones")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    ap.add_argument("--size", default="1400,1700")
    a = ap.parse_args()
    origin = "{0.scheme}://{0.netloc}/".format(urllib.parse.urlparse(a.url))
    profile = tempfile.mkdtemp(prefix="shoal-chromium-")
    proc, port = start_chromium(a.chromium, a.size, profile)
    failures = []
    try:
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30))
        page_target = next(t for t in targets if t.get("type") == "page")
        page = Page(WebSocket(page_target["webSocketDebuggerUrl"], 30))
        for domain in ("Network", "Runtime", "Log", "Page"):
            page.call(domain + ".enable")
        page.call("Page.navigate", {"url": a.url})
        deadline = time.monotonic() + a.timeout

        for chart in a.has:
            expr = f"+(document.querySelector('#chart-{chart}') || {{dataset: {{}}}}).dataset.points || 0"
            n = 0
            while time.monotonic() < deadline and n == 0:
                n = page.eval(expr) or 0
                if n == 0:
                    page.pump(0.25)
            print(f"chart {chart}: {n} points")
            if n == 0:
                failures.append(f"chart {chart} shows no point after {a.timeout:.0f} s")

        for chart in a.grow:
            expr = f"+(document.querySelector('#chart-{chart}') || {{dataset: {{}}}}).dataset.points || 0"
            first = 0
            while time.monotonic() < deadline:
                first = page.eval(expr) or 0
                if first > 0:
                    break
                page.pump(0.5)
            later = first
            while first > 0 and time.monotonic() < deadline and later <= first:
                page.pump(0.5)
                later = page.eval(expr) or 0
            print(f"chart {chart}: {first} points, then {later}")
            if not (0 < first < later):
                failures.append(f"chart {chart} did not gain points ({first}, then {later}) in {a.timeout:.0f} s")

        if a.then:
            print(f"running: {a.then}")
            subprocess.run(a.then, shell=True, check=False, timeout=60)
        for want in a.state:
            run, rest = want.rsplit(":", 1)
            rank, st = rest.split("=")
            expr = ("(function(){const t=[...document.querySelectorAll('table.ranks')].find(t=>t.dataset.run=="
                    + json.dumps(run) + "); if(!t) return null; const r=t.querySelector('tr[data-rank=\"'+"
                    + json.dumps(rank) + "+'\"]'); return r ? r.dataset.state : null;})()")
            seen = None
            while time.monotonic() < deadline:
                seen = page.eval(expr)
                if seen == st:
                    break
                page.pump(0.25)
            print(f"run {run} rank {rank}: {seen}")
            if seen != st:
                failures.append(f"run {run} rank {rank} shows {seen}, not {st}, after {a.timeout:.0f} s")

        page.pump(0.5)
        if a.screenshot:
            shot = page.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
            with open(a.screenshot, "wb") as f:
                f.write(base64.b64decode(shot["data"]))
            print(f"screenshot: {a.screenshot}")
        outside = [u for u in page.requests if not (u.startswith(origin) or u.startswith("data:")
                                                    or u.startswith("blob:"))]
        print(f"requests: {len(page.requests)}, all to {origin}" if not outside else f"requests elsewhere: {outside}")
        if outside:
            failures.append("the page asked for something outside its server: " + ", ".join(outside[:5]))
        if not page.requests:
            failures.append("the page made no request at all")
        if page.errors:
            failures.append("the page logged errors: " + "; ".join(str(e) for e in page.errors[:5]))
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(profile, ignore_errors=True)
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
