#!/usr/bin/env bash
# shoal serve (issue 25), over HTTP on loopback:
#  1. every endpoint's answer for a fixture: a compare folder (report.md,
#     results.csv, runs/ with a damaged and a half-written metrics line)
#     and a workspace, with a link to a run outside and a file that is
#     not a run beside them (test/e2e/lib/dashboard_http.py);
#  2. bad names (../, absolute, '.', '//', the link, the file) get 4xx
#     and nothing outside; POST is refused; a Host that is not loopback
#     is refused;
#  3. 200 clients at once, with clients that never read (a large
#     answer, an event stream) and one that never speaks: all answered,
#     the server goes on;
#  4. a token: the data without it 401, with it (query or Bearer) 200;
#     the address carries one derived from the file's, never the file's own;
#     the page's own files (no data) load without it, as a browser asks;
#  5. bad input: a port in use, a folder with no runs, a missing folder,
#     a listen address that is not loopback without a token, a malformed
#     one, and run --serve on a port in use: each a clear error, exit 1
#     or 2, nothing trained;
#  6. the workspace removed while a job with the page open trains: the
#     job ends, no hang, the server answers for the folder as it is.
# Every wait is bounded; the servers started here are stopped by pid.
# Usage: dashboard_http.sh BUILD
set -uo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
shoal="$BUILD/shoal"
dir=$(mktemp -d)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
chartjs=/usr/share/javascript/chart.js/chart.min.js
[ -f "$chartjs" ] || { echo "SKIP: $chartjs missing (Debian package libjs-chart.js; make deps)"; exit 77; }

# ---- the fixture -------------------------------------------------------------
fix="$dir/fix"
mkdir -p "$fix/cmp/runs/downpour-r1" "$fix/cmp/runs/ssp-r1" "$fix/ws" "$dir/outside"
cat >"$fix/cmp/runs/downpour-r1/metrics.jsonl" <<'EOF'
{"time":0.000,"phase":"cluster","event":"layout","host":"h","heartbeat_interval":1,"heartbeat_timeout":15,"progress_timeout":300,"nslices":2,"ranks":[{"rank":0,"holds":"2 workers of group 0","workers":[[0,0],[0,1]],"servers":[],"slices":[]},{"rank":1,"endpoint":"127.0.0.1:4000","holds":"2 servers","workers":[],"servers":[[0,0],[0,1]],"slices":[0,1]}]}
{"time":0.2,"phase":"cluster","event":"rank","rank":0,"state":"alive","pid":10}
{"time":1.0,"step":10,"group":0,"worker":0,"phase":"train","loss":2.1,"accuracy":0.3,"samples_per_sec":900,"samples":640,"compute_s":0.5,"wait_s":0.2,"peer_wait_s":0}
{"time":1.1,"phase":"process","rank":1,"bytes_sent":1000,"bytes_received":2000,"updates":20,"dropped":0,"staleness_count":20,"staleness_mean":0.5,"staleness_p95":1,"staleness_max":1,"staleness_hist":[10,10]}
this line is damaged
{"time":2.0,"step":20,"group":0,"worker":0,"phase":"test","loss":1.2,"accuracy":0.6,"samples":1280}
[1,2,3]
{"time":2.5,"step":25,"group":0,"worker":0,"phase":"train","loss":1.0,"accuracy":0.7,"samples_per_sec":950,"samples":1600,"compute_s":0.4,"wait_s":0.1,"peer_wait_s":0}
{"time":2.6,"step":26,"gro
EOF
printf '%s' "$(cat "$fix/cmp/runs/downpour-r1/metrics.jsonl")" >"$fix/cmp/runs/downpour-r1/m" \
  && mv "$fix/cmp/runs/downpour-r1/m" "$fix/cmp/runs/downpour-r1/metrics.jsonl"   # the last line has no newline
# a large run: an answer a client that never reads cannot take in
python3 -c '
import sys
line = "{\"time\":%d.0,\"step\":%d,\"group\":0,\"worker\":0,\"phase\":\"train\",\"loss\":1.0,\"pad\":\"%s\"}\n"
with open(sys.argv[1], "w") as f:
    for i in range(30000):
        f.write(line % (i, i, "x" * 200))
' "$fix/cmp/runs/ssp-r1/metrics.jsonl"
printf '| scheme | final accuracy |\n|---|---|\n| downpour | 0.60 |\n' >"$fix/cmp/report.md"
printf 'scheme,run,final_accuracy\ndownpour,1,0.60\n' >"$fix/cmp/results.csv"
printf '{"time":1,"step":1,"group":0,"worker":0,"phase":"train","loss":2}\n' >"$fix/ws/metrics.jsonl"
printf '{"time":1,"step":1,"group":0,"worker":0,"phase":"train","loss":2}\n' >"$dir/outside/metrics.jsonl"
ln -s "$dir/outside" "$fix/cmp/runs/linked"
echo 'not a run' >"$fix/notarun.txt"

# start_server LOG ARGS...: starts shoal serve, sets $url (empty when it did not come up)
start_server() {
  local log=$1
  shift
  "$shoal" serve "$@" >"$log" 2>&1 &
  pids+=($!)
  url=
  for _ in $(seq "$(scaled 100)"); do
    url=$(grep -o 'http://127\.0\.0\.1:[0-9]*/[^ ]*' "$log" | head -1)
    [ -n "$url" ] && break
    kill -0 "${pids[-1]}" 2>/dev/null || break
    sleep 0.1
  done
}

# ---- 1-3: the endpoints ---------------------------------------------------------
start_server "$dir/serve.log" "$fix" --listen 127.0.0.1:0
if [ -z "$url" ]; then
  fail "shoal serve did not start: $(cat "$dir/serve.log")"
else
  echo "serving $url"
  # it says what it found to serve, not only where
  grep -qE "^shoal serve: [0-9]+ runs? (\([0-9]+ compare folders?\) )?under $fix at http://127\.0\.0\.1:" "$dir/serve.log" \
    || fail "shoal serve does not say what it serves: $(cat "$dir/serve.log")"
  timeout "$(scaled 240)" python3 test/e2e/lib/dashboard_http.py "$url" "$fix" "$chartjs" || fail "HTTP answers (above)"
  kill -0 "${pids[-1]}" 2>/dev/null || fail "the server died: $(cat "$dir/serve.log")"
fi

# ---- 4: a token ------------------------------------------------------------------------
echo 0123456789abcdef0123456789abcdef >"$dir/token"
chmod 644 "$dir/token"   # others may read it: shoal serve says so, as shoal proc does
start_server "$dir/serve-token.log" "$fix/ws" --listen 127.0.0.1:0 --token-file "$dir/token"
if [ -z "$url" ]; then
  fail "shoal serve --token-file did not start: $(cat "$dir/serve-token.log")"
else
  # the address carries a token derived from the file's (HMAC-SHA256 keyed
  # by it, docs/SECURITY.md), never the file's own: a job's token must not
  # travel in clear HTTP
  derived=$(python3 -c 'import hashlib, hmac, sys; print(hmac.new(sys.argv[1].encode(), b"shoal dashboard", hashlib.sha256).hexdigest()[:32])' \
              0123456789abcdef0123456789abcdef)
  grep -q "token=$derived" "$dir/serve-token.log" || fail "the address printed lacks the derived token: $(cat "$dir/serve-token.log")"
  grep -q '0123456789abcdef0123456789abcdef' "$dir/serve-token.log" && fail "the file's own token was printed"
  grep -q "$dir/token: the token is readable by other users (mode 644); chmod 600 it" "$dir/serve-token.log" \
    || fail "a token file others may read: no warning"
  root=${url%%\?*}
  code() { curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$@"; }
  [ "$(code "${root}api/runs")" = 401 ] || fail "no token: not 401"
  [ "$(code "${root}api/runs?token=wrong")" = 401 ] || fail "a wrong token: not 401"
  [ "$(code "${root}api/runs?token=0123456789abcdef0123456789abcdef")" = 401 ] \
    || fail "the file's own token opened the data: it is not what requests carry"
  [ "$(code "${root}api/metrics?run=ws&from=0")" = 401 ] || fail "the metrics without a token: not 401"
  [ "$(code "${root}app.js")" = 200 ] || fail "the page's script (no data) without the token: not 200"
  [ "$(code "${root}api/runs?token=$derived")" = 200 ] || fail "the data with the address's token: not 200"
  [ "$(code -H "Authorization: Bearer $derived" "${root}api/runs")" = 200 ] \
    || fail "a Bearer token: not 200"
  echo "ok: the token is required, and the file's own never travels"
fi

# ---- 5: bad input ----------------------------------------------------------------------------
# expect STATUS TEXT ARGS...: shoal ARGS exits STATUS and says TEXT (a fixed string) on stderr
expect() {
  local want=$1 text=$2
  shift 2
  timeout "$(scaled 60)" "$shoal" "$@" >"$dir/out" 2>"$dir/err"
  local got=$?
  if [ "$got" -ne "$want" ] || ! grep -qF -- "$text" "$dir/err"; then
    fail "shoal $*: exit $got, expected $want with '$text'; said: $(cat "$dir/err")"
  else
    echo "ok: $(head -1 "$dir/err")"
  fi
}
mkdir -p "$dir/empty/sub"
expect 1 "no runs (no metrics.jsonl in it or its folders" serve "$dir/empty"
expect 1 "$dir/missing: No such file or directory" serve "$dir/missing"
expect 1 "is not a loopback address: anyone who reaches it could read the runs; give a token" \
  serve "$fix" --listen 0.0.0.0:0
expect 1 "--listen 127.0.0.1:99999: expected PORT, ADDRESS:PORT" serve "$fix" --listen 127.0.0.1:99999
expect 1 "--listen nohost:80: expected PORT, ADDRESS:PORT" serve "$fix" --listen nohost:80
expect 2 "expected at least one folder" serve
# a port in use: held by a listener of this test
exec {holder}< <(python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
print(s.getsockname()[1], flush=True); time.sleep(120)')
pids+=($!)
read -r -t 20 busy <&"$holder"
if [ -n "${busy:-}" ]; then
  expect 1 "--listen 127.0.0.1:$busy: cannot listen:" serve "$fix" --listen "127.0.0.1:$busy"
  grep -qF "another program has this port" "$dir/err" || fail "port in use: the message does not say so"
  expect 1 "shoal run: --serve: --listen 127.0.0.1:$busy: cannot listen:" \
    run examples/fashion-mnist/mlp.conf --workspace "$dir/busy-ws" --serve "$busy"
  [ ! -e "$dir/busy-ws/metrics.jsonl" ] || fail "run --serve on a port in use trained anyway"
else
  fail "could not hold a port for the port-in-use case"
fi

# ---- 6: the workspace removed while a job with the page open trains ---------------------
# The job trains to its end and does not hang (its ranks write on into
# the removed files, and make the folder again for what they write
# later: the last metrics lines, the final checkpoint), and the server
# answers for the folder as it finds it (no run, or the run made again).
# 10 ms a step ([emulate]): the removal comes mid-run.
gone="$dir/gone-ws"
timeout -k 10 "$(scaled 120)" "$shoal" run examples/fashion-mnist/mlp.conf --topology conf/sandblaster.conf \
  -o job.epochs=0 -o job.train_steps=300 -o job.test_freq=100 -o job.test_steps=5 \
  -o 'layer fc1.num_output=32' -o 'layer fc2.num_output=32' -o emulate.slow_groups=0 -o emulate.slow_extra_ms=10 \
  -q --workspace "$gone" --serve 0 >"$dir/gone.out" 2>"$dir/gone.err" &
job=$!
gone_url=
for _ in $(seq "$(scaled 100)"); do
  gone_url=$(grep -o 'watch it at http://127\.0\.0\.1:[0-9]*/' "$dir/gone.err" | sed 's/watch it at //')
  # both ranks past their start (each read the token, then opened its
  # checkpoint store): removed before, a rank found no token and the job
  # failed at its start, not mid-run (seen under load)
  [ -n "$gone_url" ] && [ -s "$gone/metrics.jsonl" ] && [ -d "$gone/checkpoint/rank-0" ] \
    && [ -d "$gone/checkpoint/rank-1" ] && break
  sleep 0.1
done
rm -rf "$gone"
if [ -n "$gone_url" ]; then
  # no run while the folder is gone, or the folder made again with what
  # the ranks wrote since (the ranks may be quicker than this request)
  runs=$(curl -s --max-time 10 "${gone_url}api/runs")
  case "$runs" in *'"runs":[]'*|*'"runs":[{"id":"gone-ws"'*) echo "ok: the page after the removal: $runs" ;;
                  *) fail "api/runs after the workspace was removed: $runs" ;; esac
else
  fail "run --serve 0 printed no address: $(cat "$dir/gone.err")"
fi
rc=0
wait "$job" || rc=$?
# 0 when a test line came after the removal (the folder made again holds
# it), 1 when none did ("... has no test result of any group"); never a
# timeout or a signal
[ "$rc" -le 1 ] || fail "the job whose workspace was removed exited with $rc: $(tail -3 "$dir/gone.err")"
grep -qE '^rank 1 \(2 servers\): exit 0$' "$dir/gone.out" || fail "the job's ranks did not end well: $(cat "$dir/gone.out")"
echo "ok: workspace removed mid-run: the job ended with $rc"

[ "$failures" -eq 0 ] || { echo "dashboard_http: $failures failure(s)"; exit 1; }
echo "dashboard_http: ok"
