#!/usr/bin/env python3
"""The dashboard's HTTP answers (test/e2e/dashboard_http.sh): every
endpoint on a fixture, bad names, many clients at once and clients that
never read.  Python's standard library only; every wait is bounded.

  dashboard_http.py BASE_URL FIXTURE_DIR CHARTJS
"""
import http.client
import json
import os
import socket
import sys
import threading
import time
import urllib.parse

base, fixture, chartjs = sys.argv[1], sys.argv[2], sys.argv[3]
u = urllib.parse.urlparse(base)
HOST, PORT = u.hostname, u.port
failures = []
# every wait below is for the (maybe sanitized, slower) server: times the
# tests' time scale (test/e2e/lib/time_scale.sh)
SCALE = float(os.environ.get("SHOAL_TEST_TIME_SCALE", "1"))


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what)


def get(path, headers=None, method="GET", timeout=20 * SCALE):
    c = http.client.HTTPConnection(HOST, PORT, timeout=timeout)
    c.request(method, path, headers=headers or {})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, r.getheader("Content-Type") or "", body, r


def q(path, **params):
    return path + "?" + urllib.parse.urlencode(params)


def valid_lines(path):
    """What the server must keep of a metrics.jsonl: complete lines that are JSON objects."""
    data = open(path, "rb").read()
    complete = data.split(b"\n")[:-1]
    good, bad = [], 0
    for line in complete:
        line = line.rstrip(b"\r ")
        if not line:
            continue
        try:
            o = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if isinstance(o, dict):
            good.append(o)
        else:
            bad += 1
    return good, bad


ws = os.path.join(fixture, "ws", "metrics.jsonl")
run1 = os.path.join(fixture, "cmp", "runs", "downpour-r1", "metrics.jsonl")

# ---- the page and its files
st, ct, body, r = get("/")
check(st == 200 and ct.startswith("text/html"), f"/: {st} {ct}")
check(b'<script src="chart.js">' in body and b"http" not in body.replace(b"http-equiv", b""),
      "/: the page loads chart.js from its own server and names no other")
csp = r.getheader("Content-Security-Policy") or ""
check("default-src 'self'" in csp, f"/: Content-Security-Policy keeps the page to its server ({csp!r})")
for path, kind in (("/app.js", "text/javascript"), ("/app.css", "text/css"), ("/chart.js", "text/javascript")):
    st, ct, body, _ = get(path)
    check(st == 200 and ct.startswith(kind) and len(body) > 100, f"{path}: {st} {ct} {len(body)} bytes")
st, ct, body, _ = get("/chart.js")
check(body == open(chartjs, "rb").read(), "/chart.js is Debian's Chart.js as installed")
check(get("/favicon.ico")[0] == 204, "/favicon.ico: 204")

# ---- the runs
st, ct, body, _ = get("/api/runs")
check(st == 200 and ct.startswith("application/json"), f"/api/runs: {st} {ct}")
runs = json.loads(body)
ids = [x["id"] for x in runs["runs"]]
check(ids == ["fix/cmp/runs/downpour-r1", "fix/cmp/runs/ssp-r1", "fix/ws"],
      f"/api/runs lists the runs under the folder, not the linked one nor the file: {ids}")
check([c["id"] for c in runs["compares"]] == ["fix/cmp"] and runs["compares"][0]["report"],
      f"/api/runs: the compare folder with its report: {runs['compares']}")
by_id = {x["id"]: x for x in runs["runs"]}
good1, bad1 = valid_lines(run1)
check(by_id["fix/cmp/runs/downpour-r1"]["lines"] == len(good1) and by_id["fix/cmp/runs/downpour-r1"]["damaged"] == bad1
      and bad1 == 2, f"/api/runs counts valid and damaged lines: {by_id['fix/cmp/runs/downpour-r1']} vs {len(good1)}, {bad1}")
check(by_id["fix/cmp/runs/downpour-r1"]["compare"] == "fix/cmp" and by_id["fix/ws"]["compare"] is None,
      "/api/runs: which compare each run belongs to")

# ---- metrics: every valid line, in order, from any line on
st, ct, body, _ = get(q("/api/metrics", run="fix/cmp/runs/downpour-r1", **{"from": 0}))
m = json.loads(body)
check(st == 200 and m["lines"] == good1 and m["next"] == len(good1) and m["damaged"] == 2,
      "/api/metrics: the valid lines, the half-written last line left out, damaged ones counted")
st, ct, body, _ = get(q("/api/metrics", run="fix/cmp/runs/downpour-r1", **{"from": 3}))
check(json.loads(body)["lines"] == good1[3:] and json.loads(body)["from"] == 3, "/api/metrics from=3")

# growth: appended lines come, a line being written waits for its newline
before = json.loads(get(q("/api/metrics", run="fix/ws", **{"from": 0}))[2])["next"]
with open(ws, "a") as f:
    f.write('{"time":9.5,"step":90,"group":0,"worker":0,"phase":"train","loss":0.5}\n{"time":9.6,"st')
    f.flush()
mid = json.loads(get(q("/api/metrics", run="fix/ws", **{"from": before}))[2])
check(mid["next"] == before + 1 and len(mid["lines"]) == 1 and mid["lines"][0]["step"] == 90,
      f"/api/metrics after an append: one more line, the half line waits ({mid['next']} after {before})")
with open(ws, "a") as f:
    f.write('ep":91,"group":0,"worker":0,"phase":"train","loss":0.4}\n')
after = json.loads(get(q("/api/metrics", run="fix/ws", **{"from": before}))[2])
check(after["next"] == before + 2 and after["lines"][1]["step"] == 91, "the half line, finished, counts")

# ---- the live feed: what comes after the lines the page has
s = socket.create_connection((HOST, PORT), timeout=20 * SCALE)
watch = urllib.parse.quote(json.dumps({"fix/ws": after["next"]}))
s.sendall(f"GET /api/events?watch={watch} HTTP/1.1\r\nHost: {HOST}:{PORT}\r\n\r\n".encode())
buf = b""
deadline = time.monotonic() + 10 * SCALE
while b"shoal dashboard" not in buf and time.monotonic() < deadline:
    buf += s.recv(65536)
check(b"text/event-stream" in buf, "/api/events answers an event stream")
with open(ws, "a") as f:
    f.write('{"time":9.7,"step":92,"group":0,"worker":0,"phase":"train","loss":0.3}\n')
deadline = time.monotonic() + 15 * SCALE
while b'"step":92' not in buf and time.monotonic() < deadline:
    try:
        buf += s.recv(65536)
    except socket.timeout:
        break
s.close()
check(b"event: lines" in buf and f'"from":{after["next"]}'.encode() in buf and b'"step":92' in buf,
      "/api/events pushes the appended line, from the line the page had")

# ---- a new run in the same workspace (the old one moved aside): read again, from its start
gen = after["generation"]
with open(ws + ".new", "w") as f:
    f.write('{"time":0.5,"step":5,"group":0,"worker":0,"phase":"train","loss":2.5}\n')
os.replace(ws + ".new", ws)
fresh = json.loads(get(q("/api/metrics", run="fix/ws", **{"from": 0}))[2])
check(fresh["generation"] == gen + 1 and fresh["next"] == 1 and fresh["lines"][0]["step"] == 5,
      f"a replaced metrics.jsonl starts over: generation {fresh['generation']} after {gen}, {fresh['next']} lines")

# ---- the compare folder's report and results
st, ct, body, _ = get(q("/api/report", compare="fix/cmp"))
check(st == 200 and body == open(os.path.join(fixture, "cmp", "report.md"), "rb").read(), f"/api/report: {st}")
st, ct, body, _ = get(q("/api/results", compare="fix/cmp"))
check(st == 200 and ct.startswith("text/csv") and body == open(os.path.join(fixture, "cmp", "results.csv"), "rb").read(),
      f"/api/results: {st} {ct}")

# ---- bad names and requests: 4xx, never a file outside
bad = [
    (q("/api/metrics", run="../etc"), 400),
    (q("/api/metrics", run="fix/../../etc"), 400),
    (q("/api/metrics", run="/etc/passwd"), 400),
    (q("/api/metrics", run="fix//ws"), 400),
    (q("/api/metrics", run="fix/./ws"), 400),
    (q("/api/metrics", run="fix/cmp/runs/downpour-r1/../../../ws"), 400),
    ("/api/metrics", 400),
    (q("/api/metrics", run="fix/ws", **{"from": "x"}), 400),
    (q("/api/metrics", run="fix/cmp/runs/linked"), 404),    # a link to a run outside
    (q("/api/metrics", run="fix/notarun.txt"), 404),        # a file, not a run
    (q("/api/metrics", run="fix/cmp"), 404),                # a folder with no metrics.jsonl
    (q("/api/metrics", run="outside"), 404),
    (q("/api/report", compare="fix/ws"), 404),              # a run is no compare folder
    (q("/api/report", compare="../fix"), 400),
    (q("/api/results", compare="fix/cmp/runs/linked"), 404),
    (q("/api/events", watch="[1"), 400),
    ("/etc/passwd", 404),
    ("/../../etc/passwd", 404),
    ("/%2e%2e/%2e%2e/etc/passwd", 404),
    ("/api/nothing", 404),
]
for path, want in bad:
    st, ct, body, _ = get(path)
    check(st == want and ct.startswith("application/json") and "error" in json.loads(body),
          f"{path}: {st}, expected {want} with a JSON error")
    check(b"root:" not in body, f"{path}: nothing of /etc/passwd")
st = get("/api/runs", method="POST")[0]
check(st == 405, f"POST: {st}, expected 405 (read-only)")
st = get("/api/runs", method="DELETE")[0]
check(st == 405, f"DELETE: {st}, expected 405")
st = get("/api/runs", headers={"Host": "attacker.example:80"})[0]
check(st == 403, f"a Host that is not loopback: {st}, expected 403 (DNS rebinding)")

# ---- a client that never reads, and 200 at once
never = []
for path in ("/api/metrics?run=fix/cmp/runs/ssp-r1&from=0", "/api/events?watch=%7B%22fix%2Fcmp%2Fruns%2Fssp-r1%22%3A0%7D"):
    s = socket.create_connection((HOST, PORT), timeout=20 * SCALE)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: {HOST}:{PORT}\r\n\r\n".encode())
    never.append(s)
# one that connects and says nothing
silent = socket.create_connection((HOST, PORT), timeout=20 * SCALE)

results = []
lock = threading.Lock()


def client(i):
    try:
        path = "/api/runs" if i % 3 == 0 else q("/api/metrics", run="fix/ws", **{"from": 0}) if i % 3 == 1 else "/app.js"
        st = get(path, timeout=60 * SCALE)[0]
    except Exception as e:  # noqa: BLE001 - any failure counts
        st = repr(e)
    with lock:
        results.append(st)


threads = [threading.Thread(target=client, args=(i,)) for i in range(200)]
for t in threads:
    t.start()
for t in threads:
    t.join(90)
ok = sum(1 for x in results if x == 200)
check(ok == 200, f"200 clients at once: {ok} answered 200 ({[x for x in results if x != 200][:3]})")
st = get("/api/runs")[0]
check(st == 200, "the server still answers after them, with clients that never read still connected")
for s in never + [silent]:
    s.close()

print(f"dashboard_http: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
