#!/usr/bin/env bash
# What watching costs a job (issue 25: under 2 %): the same Downpour job
# (examples/fashion-mnist/mlp.conf, conf/downpour.conf: 3 processes) run
# plain and watched, in turn (A B A B: load from other processes hits
# both alike).  Watched: `shoal serve` on its workspace (the server of
# `run --serve`, in a process of its own so its CPU time can be read) and
# a page open on it: what the browser's page asks of the server -
# /api/runs, the run's lines, then the event stream, read as it comes (a
# Python client: the browser's drawing, on the user's machine usually,
# is not counted).
# Per setup the median samples/s of worker 0's train windows (bench/lib.sh
# rate) and the ratio watched/plain of each pair (A B B A...), with their
# median; and the server's CPU seconds against the job's (user + sys of
# every process): on a busy machine the ratio is mostly the neighbours'
# noise, the CPU share is what the server takes from the job at most.
#   bench/dashboard.sh [BUILD]
#   knobs: BENCH_DASH_REPEATS=5 BENCH_DASH_STEPS=600
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD=${1:-build}
REPEATS=${BENCH_DASH_REPEATS:-5}
STEPS=${BENCH_DASH_STEPS:-600}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=bench/lib.sh
. bench/lib.sh

job=("$BUILD/shoal" run examples/fashion-mnist/mlp.conf --topology conf/downpour.conf -q --oversubscribe
     -o job.epochs=0 -o "job.train_steps=$STEPS" -o job.disp_freq=10 -o job.test_freq=0 -o job.test_steps=1)

# a page open on the job: what app.js asks, then the stream read to its end
watch_page () {  # watch_page LOG
  /usr/bin/python3 - "$1" <<'PY'
import json, re, sys, time, urllib.parse, urllib.request
log = sys.argv[1]
url = None
deadline = time.monotonic() + 60
while url is None and time.monotonic() < deadline:
    m = re.search(r"(http://127\.0\.0\.1:\d+/)", open(log).read())
    url = m.group(1) if m else None
    time.sleep(0.05)
if url is None:
    sys.exit("no dashboard address in " + log)
urllib.request.urlopen(url, timeout=30).read()
for f in ("app.js", "app.css", "chart.js"):
    urllib.request.urlopen(url + f, timeout=30).read()
# the page is opened once the run has written its first lines
runs = {"runs": []}
while not runs["runs"] and time.monotonic() < deadline:
    runs = json.load(urllib.request.urlopen(url + "api/runs", timeout=30))
    time.sleep(0.05)
watch = {}
for r in runs["runs"]:
    m = json.load(urllib.request.urlopen(url + "api/metrics?" + urllib.parse.urlencode({"run": r["id"], "from": 0}),
                                         timeout=30))
    watch[r["id"]] = m["next"]
events = 0
try:
    with urllib.request.urlopen(url + "api/events?" + urllib.parse.urlencode({"watch": json.dumps(watch)}),
                                timeout=120) as s:
        for line in s:
            events += line.startswith(b"event: lines")
except Exception:
    pass   # the job ended and took the server with it
print(f"page: {events} line events", file=sys.stderr)
PY
}

: >"$tmp/plain"
: >"$tmp/served"
: >"$tmp/ratios"
: >"$tmp/server-cpu"
: >"$tmp/job-cpus"
run_plain () {
  /usr/bin/time -f '%U %S' -o "$tmp/plain-cpu" "${job[@]}" --workspace "$tmp/ws-plain" >/dev/null 2>&1 || { echo "bench/dashboard: the plain run failed" >&2; exit 1; }
  plain=$(rate "$tmp/ws-plain/metrics.jsonl")
  rm -rf "$tmp/ws-plain"
}

run_watched () {
  /usr/bin/time -f '%U %S' -o "$tmp/job-cpu" "${job[@]}" --workspace "$tmp/ws-served" >"$tmp/job.log" 2>&1 &
  pid=$!
  # `shoal serve` wants a folder with a run: it starts once the job's first line is there
  for _ in $(seq 600); do [ -s "$tmp/ws-served/metrics.jsonl" ] && break; sleep 0.05; done
  "$BUILD/shoal" serve "$tmp/ws-served" --listen 127.0.0.1:0 >"$tmp/served.log" 2>&1 &
  server=$!
  watch_page "$tmp/served.log" 2>>"$tmp/page.log" &
  page=$!
  wait "$pid" || { cat "$tmp/job.log" >&2; echo "bench/dashboard: the watched run failed" >&2; exit 1; }
  # the server's CPU seconds (utime + stime), then it stops and the page with it
  awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f\n", ($14 + $15) / hz }' "/proc/$server/stat" >>"$tmp/server-cpu"
  awk '{ printf "%.2f\n", $1 + $2 }' "$tmp/job-cpu" >>"$tmp/job-cpus"
  kill "$server"
  wait "$server" "$page"
  served=$(rate "$tmp/ws-served/metrics.jsonl")
  rm -rf "$tmp/ws-served"
}

# A B B A: a trend in the machine's load hits both alike
for i in $(seq "$REPEATS"); do
  if [ $((i % 2)) -eq 1 ]; then run_plain; run_watched; else run_watched; run_plain; fi
  echo "$plain" >>"$tmp/plain"
  echo "$served" >>"$tmp/served"
  awk -v a="$served" -v b="$plain" 'BEGIN { printf "%.4f\n", a / b }' >>"$tmp/ratios"
  echo "pair $i: plain $plain samples/s, watched $served ($(tail -1 "$tmp/ratios")); server $(tail -1 "$tmp/server-cpu") CPU s, job $(tail -1 "$tmp/job-cpus") CPU s; $(tail -1 "$tmp/page.log")"
done
share=$(paste "$tmp/server-cpu" "$tmp/job-cpus" | awk '{ print 100 * $1 / $2 }' | median)
printf 'Downpour mlp, %d steps, %d interleaved pairs: plain %s samples/s, watched %s (medians); watched/plain %s (median of the pairs'"'"' ratios); the server used %.2f %% of the job'"'"'s CPU time (median)\n' \
  "$STEPS" "$REPEATS" "$(median <"$tmp/plain")" "$(median <"$tmp/served")" "$(median <"$tmp/ratios")" "$share"
