#!/usr/bin/env bash
# The virtual clock's timing model end to end (docs/SCALE.md):
#  1. latency adds once per message: one unit, one server process, a
#     fixed step and 1 ms latency, no bandwidth limit: every step costs
#     step_ms + 2 x slices x 1 ms (a push and its reply per slice);
#  2. incast at the server's NIC: 4 groups in lockstep push every slice
#     into one server process whose NIC (nic_mbit) they share, and its
#     replies share its out side: a step costs step_ms + 2 x 4 x bytes / B;
#     links of B alone (bandwidth_mbit, no nic_mbit) give the NICs their
#     speed: the same steps; with nic_mbit = unlimited each group's link
#     is its own (the real clock's per-socket limit): step_ms + 2 x bytes / B;
#     the wire codecs: 1-bit gradients and bf16 values are charged their
#     encoded bytes (the clocks' numbers with them: clocks_agree.sh);
#  3. shoal calibrate writes a file (a message's transport: a fixed part
#     and a part per byte), and the model charges its fixed part once per
#     message: with 1 ms a message and nothing per byte, a step costs
#     step_ms + 2 x slices x 1 ms, as latency does;
#     the same calibrated compare twice,
#     once a run at a time and once two at once (--jobs), writes the same
#     results.csv (but the wall_s column, the real seconds each run took)
#     and the report names the file;
#     the test pass: calibrate measures a test batch (test_batch_ms); in
#     a synchronous group the other unit waits for the tester's pass,
#     exactly its calibrated time, and the tester's window leaves it out;
#     a file without the key loads (its passes cost nothing, said once);
#  4. a process's cores: calibrate measures the in-process passes; a
#     Hogwild group whose own server is in its process waits for the comm
#     thread's copy of every slice (pull_ns_per_byte), exactly; with the
#     sync passes charged and one core a process (process_cores = 1) the
#     steps' compute stretches, and with nothing to charge it does not;
#  5. the backward's hand-offs: calibrate records when each layer's
#     gradients were final; a slice leaves once its layers' backward is
#     done, during the step (one unit, two server shards, a fixed step
#     of 10 ms, 1 ms a message: every slice ready at three quarters of
#     the step costs max(10, 7.5 + 2 x slices) ms a step, exactly), and
#     not before the step's end where the step is clipped as a whole or
#     a hand-off covers no slice (10 + 2 x slices);
#     the order the comm thread sends a batch in (comm/param_client.c):
#     AllReduce's 2 workers send the slices of one process's server
#     first, then the other's, so with 2m slices, a 5 ms step and 1 ms a
#     message a step costs 5 + (4m - 2) ms, where top-down alternation
#     would overlap the two directions (5 + 2m);
#  6. bad input, each a clear error naming the key: an unknown
#     distribution, a NIC bandwidth of 0, the timing keys on the real
#     clock, a calibration file of another model, a damaged one (a test
#     batch's time too), too few process cores.
# The exact checks of 3 and 4 take the hand-offs out of their files
# (no_hand_offs): each prices one cost alone.
# Usage: timing_model.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
no_hand_offs='/^ready_\(from\|fraction\)=/d'

TINY=(examples/fashion-mnist/mlp.conf -o job.epochs=0 -o job.test_freq=0 -o job.test_steps=5 -o job.disp_freq=1
      -o 'layer fc1.num_output=32' -o 'layer fc2.num_output=32' -o job.threads=1 -o emulate.clock=virtual)
ONE_SERVER=(-o cluster.nworkers_per_group=1 -o cluster.nworkers_per_procs=1 -o cluster.nservers_per_group=1
            -o cluster.nservers_per_procs=1 -o cluster.server_worker_separate=true)

# one unit and one server process, a fixed step of 10 ms, 5 steps
one_unit_run () {  # NAME WHAT OPTION...: into $dir/NAME
  local name=$1 what=$2
  shift 2
  "$BUILD/shoal" run "${TINY[@]}" "${ONE_SERVER[@]}" --topology conf/downpour.conf -o cluster.nworker_groups=1 \
    -o job.train_steps=5 -o emulate.step_ms=10 "$@" --workspace "$dir/$name" >"$dir/$name.out" 2>&1 \
    || { tail -3 "$dir/$name.out"; fail "$what"; }
}
step_period () {  # NAME PERIOD_MS WHAT: every step of run NAME ends PERIOD_MS after the one before
  /usr/bin/python3 - "$dir/$1/metrics.jsonl" "$2" "$3" <<'PY' || fail "$3"
import json, sys
train = [r for r in map(json.loads, open(sys.argv[1])) if r["phase"] == "train"]
period = float(sys.argv[2]) * 1e-3
assert len(train) == 5, len(train)
for r in train:
    want = (r["step"] - 1) * period + 10e-3
    assert abs(r["vtime"] - want) < 1e-6, (r["step"], r["vtime"], want)
print("%s: a step every %.1f ms: ok" % (sys.argv[3], period * 1e3))
PY
}
# every step of run NAME costs 10 ms + 2 x slices x 1 ms (a push and its
# reply per slice, 1 ms each), exactly
step_costs_1ms_a_message () {  # NAME WHAT
  step_period "$1" "$((10 + 2 * slices))" "$2: 1 ms a message, $slices slices"
}

# 1. latency once per message
one_unit_run lat "the latency run" -o emulate.latency_ms=1
slices=$(sed -n 's/.*server group, \([0-9]*\) slices.*/\1/p' "$dir/lat.out")
[ -n "$slices" ] || fail "no slice count in the log"
step_costs_1ms_a_message lat "latency"

# 2. incast: 4 groups into one server process's NIC of 100 Mbit/s
incast_run () {  # NAME SHARING WHAT OPTION...: 4 groups, a step every 10 ms + 2 x SHARING x push / 100 Mbit/s
  local name=$1 sharing=$2 what=$3
  shift 3
  "$BUILD/shoal" run "${TINY[@]}" "${ONE_SERVER[@]}" --topology conf/downpour.conf -o cluster.nworker_groups=4 \
    -o job.train_steps=4 -o emulate.step_ms=10 -o job.metrics_interval=0 "$@" \
    --workspace "$dir/$name" >"$dir/$name.out" 2>&1 || { tail -3 "$dir/$name.out"; fail "the $what run"; }
  /usr/bin/python3 - "$dir/$name/metrics.jsonl" "$sharing" "$what" <<'PY' || fail "$what"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
sharing = int(sys.argv[2])
train = [r for r in lines if r["phase"] == "train"]
proc = [r for r in lines if r["phase"] == "process"]
server = max(proc, key=lambda r: r["bytes_received"])
steps = max(r["step"] for r in train)
# the bytes one unit pushes per step: the server took 4 units' pushes
push = server["bytes_received"] / (4 * steps)
period = 10e-3 + 2 * sharing * push / 12.5e6
for r in train:
    want = (r["step"] - 1) * period + 10e-3
    assert abs(r["vtime"] - want) < 1e-6 * r["step"] + 1e-8, (r["group"], r["step"], r["vtime"], want)
print("%s: 4 pushes of %.0f bytes, each at 1/%d of 100 Mbit/s, a step every %.3f ms: ok"
      % (sys.argv[3], push, sharing, period * 1e3))
open(sys.argv[1] + ".push", "w").write("%.0f\n" % push)
PY
}
incast_run incast 4 "incast through one NIC" -o emulate.nic_mbit=100
incast_run links 4 "links alone: NICs of their speed" -o emulate.bandwidth_mbit=100
grep -q "NICs 100 Mbit/s (bandwidth_mbit's: no nic_mbit given)" "$dir/links.out" || fail "the log does not say the NICs took the links' speed"
incast_run unlimited 1 "links alone with unlimited NICs" -o emulate.bandwidth_mbit=100 -o emulate.nic_mbit=unlimited

# 2b. the wire codecs: 1-bit gradients and bf16 values cross the NIC as
# their bytes (one unit, one 100 Mbit/s server NIC: a step every 10 ms +
# the step's bytes each way / 100 Mbit/s, the bytes about 1/32 and 1/2
# of fp32's)
one_unit_run coded "the wire codecs' run" -o emulate.nic_mbit=100 -o cluster.wire_grads=1bit -o cluster.wire_values=bf16
/usr/bin/python3 - "$dir/coded/metrics.jsonl" "$(cat "$dir/incast/metrics.jsonl.push")" <<'PY' || fail "the wire codecs' bytes"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
fp32 = float(sys.argv[2])
train = [r for r in lines if r["phase"] == "train"]
server = max((r for r in lines if r["phase"] == "process"), key=lambda r: r["bytes_sent"])
steps = max(r["step"] for r in train)
push, reply = server["bytes_received"] / steps, server["bytes_sent"] / steps
assert 20 < fp32 / push <= 32 and fp32 / reply == 2, (fp32, push, reply)
period = 10e-3 + (push + reply) / 12.5e6
for r in train:
    want = (r["step"] - 1) * period + 10e-3
    assert abs(r["vtime"] - want) < 1e-6 * r["step"] + 1e-8, (r["step"], r["vtime"], want)
print("wire codecs: a push of %.0f bytes (1bit), a reply of %.0f (bf16) against %.0f, a step every %.3f ms: ok"
      % (push, reply, fp32, period * 1e3))
PY

# 3. calibrate; a calibrated compare twice
"$BUILD/shoal" calibrate "${TINY[0]}" -o 'layer fc1.num_output=32' -o 'layer fc2.num_output=32' -o job.threads=1 \
  --steps 20 --out "$dir/tiny.cal" >"$dir/cal.out" 2>&1 || { cat "$dir/cal.out"; fail "shoal calibrate"; }
grep -q "^shoal calibrate: $dir/tiny.cal: model [0-9a-f]*, 20 steps" "$dir/cal.out" || fail "calibrate's summary"
grep -q "^rpc_ns_per_byte=[0-9.e-]*$" "$dir/tiny.cal" || fail "calibrate did not measure the transport (rpc_ns_per_byte)"
grep -qE "^rpc_us_per_message=[0-9.e-]+$" "$dir/tiny.cal" \
  || fail "calibrate did not measure a message's fixed cost (rpc_us_per_message)"
sed -e 's/^rpc_us_per_message=.*/rpc_us_per_message=1000/' -e 's/^rpc_ns_per_byte=.*/rpc_ns_per_byte=0/' \
  -e 's/^update_ns_per_byte=.*/update_ns_per_byte=0/' -e "$no_hand_offs" "$dir/tiny.cal" >"$dir/message.cal"
one_unit_run msg "the run with 1 ms a message" -o "emulate.calibration=$dir/message.cal"
# the wire codecs' CPU time: 1 us to encode a 1-bit gradient value, 0.5 to
# decode it, 0.2 and 0.1 for a bf16 value: each step 1.8 us a value more
for key in encode_ns_per_value_1bit decode_ns_per_value_1bit encode_ns_per_value_bf16 decode_ns_per_value_bf16; do
  grep -q "^$key=[0-9.e-]*$" "$dir/tiny.cal" || fail "calibrate did not measure $key"
done
sed -e 's/^rpc_us_per_message=.*/rpc_us_per_message=0/' -e 's/^encode_ns_per_value_1bit=.*/encode_ns_per_value_1bit=1000/' \
  -e 's/^decode_ns_per_value_1bit=.*/decode_ns_per_value_1bit=500/' -e 's/^encode_ns_per_value_bf16=.*/encode_ns_per_value_bf16=200/' \
  -e 's/^decode_ns_per_value_bf16=.*/decode_ns_per_value_bf16=100/' "$dir/message.cal" >"$dir/codec.cal"
one_unit_run codec_cpu "the run with the codecs' CPU time" -o "emulate.calibration=$dir/codec.cal" \
  -o cluster.wire_grads=1bit -o cluster.wire_values=bf16
floats=$(( $(cat "$dir/incast/metrics.jsonl.push") / 4 ))
step_period codec_cpu "$(/usr/bin/python3 -c "print(10 + $floats * 1.8e-3)")" "the codecs' CPU time, $floats values"
grep -q "a message's transport 1000.0 us + 0.0000 ns/byte" "$dir/msg.out" || fail "the run's log names no message cost"
step_costs_1ms_a_message msg "a message's fixed cost"
grep -q "^concurrent=1$" "$dir/tiny.cal" || fail "calibrate did not record one worker stepping alone (concurrent=1)"
# two workers stepping at once: each times its 5 steps, one list of 10
"$BUILD/shoal" calibrate "${TINY[0]}" -o 'layer fc1.num_output=32' -o 'layer fc2.num_output=32' -o job.threads=1 \
  --steps 5 --concurrent 2 --out "$dir/tiny2.cal" >"$dir/cal2.out" 2>&1 || { cat "$dir/cal2.out"; fail "calibrate --concurrent 2"; }
grep -q "^shoal calibrate: $dir/tiny2.cal: model [0-9a-f]*, 10 steps of 2 workers stepping at once" "$dir/cal2.out" \
  || { cat "$dir/cal2.out"; fail "calibrate --concurrent 2's summary"; }
grep -q "^concurrent=2$" "$dir/tiny2.cal" || fail "calibrate --concurrent 2 did not record it"
[ "$(sed -n 's/^step_ms=//p' "$dir/tiny2.cal" | tr ';' '\n' | grep -c .)" = 10 ] || fail "calibrate --concurrent 2: not 10 steps"
# the test pass: calibrate measures a test batch; a synchronous group of
# 2 units (10 ms steps, nothing else charged) tests at steps 2 and 4 of
# 6: with test_batch_ms = 2 each pass costs T = 5 batches x 2 ms x the
# unit's rows / the calibration's; the other unit waits T more after
# each (the line after the test), the tester's lines (its window leaves
# the pass out, as a real tester's) and compute are those of the run
# whose passes cost nothing (a file from before test_batch_ms, which the
# run says once), every later line is T later for each pass before it,
# and a test line is stamped at its pass's end
grep -qE "^test_batch_ms=[0-9.e-]+$" "$dir/tiny.cal" || fail "calibrate did not measure a test batch (test_batch_ms)"
grep -q "^shoal calibrate: .*, a test batch [0-9.]* ms," "$dir/cal.out" || fail "calibrate's summary names no test batch"
sed -e "$no_hand_offs" -e 's/^\(update\|rpc\|pull\|sync_take\|sync_apply\|sync_merge\)_ns_per_byte=.*/\1_ns_per_byte=0/' \
  -e 's/^rpc_us_per_message=.*/rpc_us_per_message=0/' -e 's/^test_batch_ms=.*/test_batch_ms=2/' "$dir/tiny.cal" >"$dir/tested.cal"
sed '/^test_batch_ms=/d' "$dir/tested.cal" >"$dir/untested.cal"
for cal in tested untested; do
  "$BUILD/shoal" run "${TINY[@]}" --topology conf/sandblaster.conf -o cluster.nworkers_per_procs=1 -o job.train_steps=6 \
    -o job.test_freq=2 -o emulate.step_ms=10 -o job.metrics_interval=0 -o "emulate.calibration=$dir/$cal.cal" \
    --workspace "$dir/$cal" >"$dir/$cal.out" 2>&1 || { tail -3 "$dir/$cal.out"; fail "the $cal run"; }
done
[ "$(grep -c "untested.cal has no test_batch_ms .*: test passes cost no virtual time" "$dir/untested.out")" = 1 ] \
  || fail "the run of a calibration without test_batch_ms did not say once that its tests cost nothing"
! grep -q "has no test_batch_ms" "$dir/tested.out" || fail "the run with test_batch_ms says it has none"
grep -q "a test batch 2.000 ms (the calibration's, at its rows)" "$dir/tested.out" \
  || fail "the run's header does not give the file's test batch"
/usr/bin/python3 - "$dir" "$(sed -n 's/^batch=//p' "$dir/tiny.cal")" <<'PY' || fail "the test pass's cost"
import json, sys
def lines(name):
    return [r for r in map(json.loads, open("%s/%s/metrics.jsonl" % (sys.argv[1], name))) if r["phase"] != "process"]
tested, untested = lines("tested"), lines("untested")
assert len(tested) == len(untested) == 2 * 6 + 3, (len(tested), len(untested))
rows = tested[0]["samples"] / tested[0]["step"]
T = 5 * 2e-3 * rows / float(sys.argv[2])
tests = [r["step"] for r in tested if r["phase"] == "test"]
assert tests == [2, 4, 6], tests
key = lambda r: (r["phase"], r["group"], r["worker"], r["step"])
free = {key(r): r for r in untested}
for r in tested:
    f = free[key(r)]
    # passes before the line: a test line's own too (stamped at its end);
    # the tester's step s + 1 begins after the pass at s, the other
    # unit's step s + 2 after waiting for it
    if r["phase"] == "test":
        before = sum(1 for s in tests if s <= r["step"])
    else:
        before = sum(1 for s in tests[:2] if s + 1 + r["worker"] <= r["step"])
    assert abs(r["vtime"] - f["vtime"] - before * T) < 1e-9, (r, f, before, T)
    if r["phase"] != "train":
        continue
    assert abs(r["compute_s"] - f["compute_s"]) < 1e-12, (r, f)
    # the tester: its window leaves its passes out; the other unit waits
    # for its push the pass's time more, once after each pass
    waits = 1 if r["worker"] == 1 and r["step"] - 2 in tests[:2] else 0
    assert abs(r["wait_s"] - f["wait_s"] - waits * T) < 1e-9, (r, f, T)
    if r["worker"] == 0:
        assert abs(r["samples_per_sec"] - f["samples_per_sec"]) < 1e-6 * f["samples_per_sec"], (r, f)
print("the test pass: %.1f ms a pass; the other unit waits it after each, the tester's window leaves it out: ok"
      % (T * 1e3))
PY
calbad() {  # MESSAGE ARGS...: calibrate refuses with MESSAGE, exit 2
  local want=$1 rc=0
  shift
  "$BUILD/shoal" calibrate "${TINY[0]}" "$@" --out "$dir/refused.cal" >"$dir/calbad.out" 2>&1 || rc=$?
  [ "$rc" = 2 ] && grep -qF -- "$want" "$dir/calbad.out" && [ ! -e "$dir/refused.cal" ] \
    || { cat "$dir/calbad.out"; fail "calibrate $*: rc $rc, not '$want'"; }
}
calbad "--concurrent: give 1 to 256 workers" --concurrent 0
calbad "--steps: give 1 to 100000 steps" --steps 0
calbad "--seconds: give a time above 0" --seconds -2
calbad "give --steps or --seconds, not both" --steps 5 --seconds 1
# a place it cannot write: said before the seconds of measuring
rc=0
"$BUILD/shoal" calibrate "${TINY[0]}" --steps 5 --out "$dir/no/such/dir/x.cal" >"$dir/calbad.out" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -qF -- "--out $dir/no/such/dir/x.cal: $dir/no/such/dir is not a directory" "$dir/calbad.out" \
  || { cat "$dir/calbad.out"; fail "calibrate into a missing directory: rc $rc"; }
# K nets in one process: the job's memory limit refuses the one that crosses it, by number
rc=0
"$BUILD/shoal" calibrate "${TINY[0]}" -o job.memory_limit=40M --concurrent 8 --steps 1 --out "$dir/refused.cal" \
  >"$dir/calmem.out" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q "the net of worker [0-9] of the 8 stepping at once (--concurrent): .*job.memory_limit is 40.0 MiB" \
  "$dir/calmem.out" && [ ! -e "$dir/refused.cal" ] || { cat "$dir/calmem.out"; fail "calibrate --concurrent 8 over the limit"; }
for run in a b; do
  jobs=1; [ $run = b ] && jobs=2
  timeout -k 5 "$(scaled 180)" "$BUILD/shoal" compare "${TINY[0]}" --schemes downpour,sandblaster --budget samples=6400 --jobs $jobs \
    --points 3 --out "$dir/cmp-$run" --quiet -o 'layer fc1.num_output=32' -o 'layer fc2.num_output=32' \
    -o job.threads=1 -o emulate.clock=virtual -o "emulate.calibration=$dir/tiny.cal" -o emulate.nic_mbit=1000 \
    -o 'emulate.step_delay=pareto(1, 2)' >"$dir/cmp-$run.out" 2>&1 || { tail -5 "$dir/cmp-$run.out"; fail "compare $run"; }
done
strip() { /usr/bin/python3 -c 'import csv,sys
rows = list(csv.reader(open(sys.argv[1])))
w = rows[0].index("wall_s")
for r in rows: print(",".join(c for i, c in enumerate(r) if i != w))' "$1"; }
diff <(strip "$dir/cmp-a/results.csv") <(strip "$dir/cmp-b/results.csv") \
  || fail "the same calibrated compare twice gave other results"
grep -q "calibration file \`$dir/tiny.cal\`" "$dir/cmp-a/report.md" || fail "the report does not name the calibration"
echo "calibrated compare twice (--jobs 1, --jobs 2): the same results.csv: ok"

# 4. a process's cores
for key in pull_ns_per_byte sync_take_ns_per_byte sync_apply_ns_per_byte sync_merge_ns_per_byte; do
  grep -qE "^$key=[0-9.e-]+$" "$dir/tiny.cal" || fail "calibrate did not measure $key"
done
zero_costs() {  # sed script: every cost of tiny.cal 0
  echo 's/^\(update\|rpc\|pull\|sync_take\|sync_apply\|sync_merge\)_ns_per_byte=.*/\1_ns_per_byte=0/;s/^rpc_us_per_message=.*/rpc_us_per_message=0/'
}
hogwild_run () {  # NAME CAL OPTION...: 2 Hogwild groups of 1 worker, a process each, 10 ms steps
  local name=$1 cal=$2
  shift 2
  "$BUILD/shoal" run "${TINY[@]}" --topology conf/hogwild.conf -o cluster.nworkers_per_group=1 \
    -o cluster.nworkers_per_procs=1 -o cluster.nservers_per_group=1 -o cluster.nservers_per_procs=1 \
    -o job.train_steps=6 -o emulate.step_ms=10 -o job.metrics_interval=0 -o "emulate.calibration=$cal" "$@" \
    --workspace "$dir/$name" >"$dir/$name.out" 2>&1 || { tail -3 "$dir/$name.out"; fail "the run $name"; }
}
# a pull of the whole model (the bytes a unit pushes a step, from the incast run) costs 1 ms
pull=$(/usr/bin/python3 -c "print(1e6 / $(cat "$dir/incast/metrics.jsonl.push"))")
sed -e "$(zero_costs)" -e "s/^pull_ns_per_byte=.*/pull_ns_per_byte=$pull/" -e "$no_hand_offs" "$dir/tiny.cal" \
  >"$dir/pull.cal"
hogwild_run pull "$dir/pull.cal" -o cluster.sync_freq=1000000
/usr/bin/python3 - "$dir/pull/metrics.jsonl" <<'PY' || fail "the in-process pull"
import json, sys
train = [r for r in map(json.loads, open(sys.argv[1])) if r["phase"] == "train"]
assert len(train) == 12, len(train)
for r in train:
    want = (r["step"] - 1) * 11e-3 + 10e-3   # 10 ms of compute, then the step's copy of 1 ms
    assert abs(r["vtime"] - want) < 1e-6, (r["group"], r["step"], r["vtime"], want)
print("a pull of the model from the unit's own server: 1 ms a step: ok")
PY
# the sync passes on one core a process stretch the compute; on a core
# of their own (process_cores = 0), or with nothing to charge, they do
# not (Hogwild's syncs run beside its workers' steps)
sed -e "$(zero_costs)" -e 's/^sync_\(take\|apply\|merge\)_ns_per_byte=.*/sync_\1_ns_per_byte=20/' \
  -e "$no_hand_offs" "$dir/tiny.cal" >"$dir/sync.cal"
sed -e "$(zero_costs)" -e "$no_hand_offs" "$dir/tiny.cal" >"$dir/free.cal"
hogwild_run sync1 "$dir/sync.cal" -o cluster.sync_freq=1 -o emulate.process_cores=1
hogwild_run sync0 "$dir/sync.cal" -o cluster.sync_freq=1 -o emulate.process_cores=0
hogwild_run free1 "$dir/free.cal" -o cluster.sync_freq=1 -o emulate.process_cores=1
grep -q "process cores 1" "$dir/sync1.out" || fail "the run's log does not name its process cores"
/usr/bin/python3 - "$dir" <<'PY' || fail "the sync passes on a process's cores"
import json, sys
def compute(name):
    train = [r for r in map(json.loads, open("%s/%s/metrics.jsonl" % (sys.argv[1], name))) if r["phase"] == "train"]
    return sum(r["compute_s"] for r in train), max(r["vtime"] for r in train)
c1, t1 = compute("sync1")
c0, t0 = compute("sync0")
cf, tf = compute("free1")
steps = 2 * 6
assert abs(c0 - steps * 10e-3) < 1e-9, c0        # a core beside the workers: the compute as drawn
assert abs(cf - steps * 10e-3) < 1e-9, cf        # nothing to charge: the same
assert c1 > c0 + 1e-4, (c1, c0)                  # one core: the passes took it from the workers
assert t1 > t0 and abs(t0 - tf) < 1e-9, (t1, t0, tf)  # beside the workers the syncs delay no step
print("sync passes: compute %.2f ms on 1 core against %.2f beside; end %.2f / %.2f / %.2f ms: ok"
      % (c1 * 1e3, c0 * 1e3, t1 * 1e3, t0 * 1e3, tf * 1e3))
PY

# 5. the backward's hand-offs
/usr/bin/python3 - "$dir/tiny.cal" <<'PY' || fail "calibrate's hand-offs"
import sys
kv = dict(l.rstrip("\n").split("=", 1) for l in open(sys.argv[1]) if "=" in l)
offsets = [int(x) for x in kv["ready_from"].split(";") if x]
fractions = [float(x) for x in kv["ready_fraction"].split(";") if x]
# the tiny MLP: three dense layers, handed off top down; the first's
# params begin the store
assert len(offsets) == len(fractions) == 3, (offsets, fractions)
assert offsets == sorted(offsets, reverse=True) and offsets[-1] == 0, offsets
assert fractions == sorted(fractions) and 0 < fractions[0] and fractions[-1] <= 1, fractions
print("calibrate's hand-offs: from %s at %s of a step: ok" % (offsets, ["%.2f" % f for f in fractions]))
PY
hand_offs() {  # CAL FROM FRACTION NAME: CAL with 1 ms a message, nothing else, and one hand-off
  sed -e "$(zero_costs)" -e "$no_hand_offs" -e 's/^rpc_us_per_message=.*/rpc_us_per_message=1000/' "$1" \
    >"$dir/$4.cal"
  printf 'ready_from=%s;\nready_fraction=%s;\n' "$2" "$3" >>"$dir/$4.cal"
}
TWO_SHARDS=(-o cluster.nservers_per_group=2 -o cluster.nservers_per_procs=2)
hand_offs "$dir/tiny.cal" 0 0.75 late
one_unit_run late "the run with its slices ready at three quarters of the step" "${TWO_SHARDS[@]}" \
  -o "emulate.calibration=$dir/late.cal"
shards=$(sed -n 's/.*server group, \([0-9]*\) slices.*/\1/p' "$dir/late.out")
[ "${shards:-0}" -ge 2 ] || fail "two server shards made ${shards:-no} slices"
step_period late "$(/usr/bin/python3 -c "print(max(10, 7.5 + 2 * $shards))")" "every slice ready at three quarters"
# a whole step's clipping needs its whole gradient: nothing leaves before its end
"$BUILD/shoal" calibrate "${TINY[0]}" -o 'layer fc1.num_output=32' -o 'layer fc2.num_output=32' -o job.threads=1 \
  -o updater.clip_norm=5 --steps 5 --out "$dir/clip-measured.cal" >"$dir/calclip.out" 2>&1 \
  || { cat "$dir/calclip.out"; fail "calibrate a clipped model"; }
hand_offs "$dir/clip-measured.cal" 0 0.75 clip
one_unit_run clipped "the clipped run" "${TWO_SHARDS[@]}" -o "emulate.calibration=$dir/clip.cal" -o updater.clip_norm=5
step_period clipped "$((10 + 2 * shards))" "a clipped step"
# a hand-off above every slice's params hands off none: all at the end
hand_offs "$dir/tiny.cal" 2000000000 0.25 above
one_unit_run above "the run with a hand-off above the params" "${TWO_SHARDS[@]}" -o "emulate.calibration=$dir/above.cal"
step_period above "$((10 + 2 * shards))" "a hand-off that covers no slice"

# the comm thread's order: AllReduce, 2 workers each with its server
# shard, fc1 of 400 (a model past 2 x 512 KiB: 2m = 4 or more slices)
"$BUILD/shoal" run "${TINY[@]}" -o 'layer fc1.num_output=400' --topology conf/allreduce.conf -o job.train_steps=5 \
  -o emulate.step_ms=10 -o emulate.latency_ms=1 -o job.metrics_interval=0 --workspace "$dir/order" >"$dir/order.out" 2>&1 \
  || { tail -3 "$dir/order.out"; fail "the AllReduce run"; }
order_slices=$(sed -n 's/.*server group, \([0-9]*\) slices.*/\1/p' "$dir/order.out")
[ "${order_slices:-0}" -ge 4 ] || fail "AllReduce's model made ${order_slices:-no} slices, not 4 or more"
/usr/bin/python3 - "$dir/order/metrics.jsonl" "$order_slices" <<'PY' || fail "the comm thread's order"
import json, sys
m = int(sys.argv[2]) // 2
train = [r for r in map(json.loads, open(sys.argv[1])) if r["phase"] == "train"]
for who in sorted({(r["group"], r["worker"]) for r in train}):
    t = [r["vtime"] for r in train if (r["group"], r["worker"]) == who]
    assert len(t) == 5, t
    # from the second step on: 5 ms of compute, then the batch by process
    for a, b in zip(t[1:], t[2:]):
        assert abs((b - a) - (5 + 4 * m - 2) * 1e-3) < 1e-6, (who, t)
print("AllReduce's batch by process, %d slices: a step every %d ms: ok" % (2 * m, 5 + 4 * m - 2))
PY

# 6. bad input
bad() {  # MESSAGE ARGS...: the run fails with MESSAGE
  local want=$1 rc=0
  shift
  timeout -k 5 "$(scaled 60)" "$BUILD/shoal" run "$@" -o job.train_steps=5 --workspace "$dir/bad" >"$dir/bad.out" 2>&1 \
    || rc=$?
  [ "$rc" != 0 ] || fail "accepted: $*"
  grep -qF -- "$want" "$dir/bad.out" || { cat "$dir/bad.out"; fail "no '$want'"; }
}
bad "[emulate] step_delay: unknown distribution 'weibull'" "${TINY[@]}" -o 'emulate.step_delay=weibull(1, 2)'
bad "[emulate] machine_factor: unknown distribution 'zipf'" "${TINY[@]}" -o 'emulate.machine_factor=zipf(2)'
bad "[emulate] nic_mbit: 0 is not a bandwidth" "${TINY[@]}" -o emulate.nic_mbit=0
bad "[emulate] nic_mbit: fast is not a bandwidth: give Mbit/s above 0 and at most 1e7, or unlimited" "${TINY[@]}" \
  -o emulate.nic_mbit=fast
bad "[emulate] core_mbit: -5 is not a bandwidth" "${TINY[@]}" -o emulate.core_mbit=-5
bad "[emulate] nic_mbit: only the virtual clock uses it" "${TINY[@]}" -o emulate.clock=real -o emulate.nic_mbit=100
bad "[emulate] process_cores: only the virtual clock uses it" "${TINY[@]}" -o emulate.clock=real -o emulate.process_cores=2
bad "[emulate] process_cores" "${TINY[@]}" -o emulate.process_cores=-1
bad "[emulate] process_cores: 1 core cannot hold process 0's 2 workers" "${TINY[@]}" --topology conf/hogwild.conf \
  -o emulate.process_cores=1 -o emulate.step_ms=10
sed 's/^sync_merge_ns_per_byte=.*/sync_merge_ns_per_byte=x/' "$dir/tiny.cal" >"$dir/merge.cal"
bad "[calibration] sync_merge_ns_per_byte: not a number >= 0" "${TINY[@]}" -o "emulate.calibration=$dir/merge.cal"
bad "is another model's calibration" "${TINY[@]}" -o 'layer fc1.num_output=48' -o "emulate.calibration=$dir/tiny.cal"
sed 's/^step_ms=\([0-9.]*\);/step_ms=\1;1;/' "$dir/tiny.cal" >"$dir/changed.cal"
bad "[calibration] step_ms_sha256: does not match step_ms" "${TINY[@]}" -o "emulate.calibration=$dir/changed.cal"
sed 's/^test_batch_ms=.*/test_batch_ms=fast/' "$dir/tiny.cal" >"$dir/testbad.cal"
bad "[calibration] test_batch_ms: not a number above 0" "${TINY[@]}" -o "emulate.calibration=$dir/testbad.cal"
sed 's/^test_batch_ms=.*/test_batch_ms=1e300/' "$dir/tiny.cal" >"$dir/testhuge.cal"
bad "[calibration] test_batch_ms: above 1e9 ms" "${TINY[@]}" -o "emulate.calibration=$dir/testhuge.cal"
# a pass of 20 test batches of 1e9 ms on a machine 1000 times slower,
# 2e19 ns, past gint64: said as the clock's end, not wrapped
sed 's/^test_batch_ms=.*/test_batch_ms=1e9/' "$dir/tiny.cal" >"$dir/testyears.cal"
bad "[emulate] the virtual clock passed 31 years (1e18 ns) at step 2" "${TINY[@]}" -o job.test_freq=2 -o job.test_steps=20 \
  -o 'emulate.machine_factor=uniform(1000, 1000)' -o "emulate.calibration=$dir/testyears.cal"
sed 's/^rpc_ns_per_byte=.*/rpc_ns_per_byte=-1/' "$dir/tiny.cal" >"$dir/rpc.cal"
bad "[calibration] rpc_ns_per_byte: not a number >= 0" "${TINY[@]}" -o "emulate.calibration=$dir/rpc.cal"
# steps of a day: a metrics tick every virtual ms once made 1e8 idle
# ticks a step (900 steps would take hours); and a step past 31 years
# (1e18 ns) overflowed the clock (vtime stayed 0)
rc=0
timeout -k 5 "$(scaled 60)" "$BUILD/shoal" run "${TINY[@]}" -o emulate.step_ms=100000000 -o job.train_steps=900 \
  -o job.metrics_interval=0.001 --workspace "$dir/days" >"$dir/days.out" 2>&1 || rc=$?
[ "$rc" -eq 0 ] || { tail -3 "$dir/days.out"; fail "a run of steps of 1e8 ms: exit $rc"; }
grep -q '"vtime":90000000\.[0-9]*,"step":900,' "$dir/days/metrics.jsonl" || fail "the 900th step of 1e5 s is not at 9e7 s"
bad "[emulate] the virtual clock passed 31 years (1e18 ns) at step 0" "${TINY[@]}" -o emulate.step_ms=1000000000 \
  -o 'emulate.machine_factor=uniform(1000000, 1000000)'
# a cost past any machine put the clock's events past its nanoseconds: the run spun at step 1
sed 's/^update_ns_per_byte=.*/update_ns_per_byte=1e300/' "$dir/tiny.cal" >"$dir/huge.cal"
bad "[calibration] update_ns_per_byte: above 1e6, past any machine's (the file was changed or damaged)" "${TINY[@]}" \
  -o "emulate.calibration=$dir/huge.cal"
sed 's/^rpc_us_per_message=.*/rpc_us_per_message=nan/' "$dir/tiny.cal" >"$dir/msgbad.cal"
bad "[calibration] rpc_us_per_message: not a number >= 0" "${TINY[@]}" -o "emulate.calibration=$dir/msgbad.cal"
sed 's/^concurrent=.*/concurrent=0/' "$dir/tiny.cal" >"$dir/conc.cal"
bad "[calibration] concurrent: not a number of workers >= 1" "${TINY[@]}" -o "emulate.calibration=$dir/conc.cal"
sed 's/^ready_fraction=\([0-9.e-]*\);\([0-9.e-]*\);/ready_fraction=\2;\1;/' "$dir/tiny.cal" >"$dir/order.cal"
bad "[calibration] ready_fraction: not one fraction of a step (0 to 1, each at least the one before)" "${TINY[@]}" \
  -o "emulate.calibration=$dir/order.cal"
sed '/^ready_fraction=/d' "$dir/tiny.cal" >"$dir/alone.cal"
bad "[calibration] ready_fraction: not one fraction" "${TINY[@]}" -o "emulate.calibration=$dir/alone.cal"
sed 's/^ready_from=[0-9]*;/ready_from=-3;/' "$dir/tiny.cal" >"$dir/below.cal"
bad "[calibration] ready_from: not a list of param offsets >= 0" "${TINY[@]}" -o "emulate.calibration=$dir/below.cal"
head -c 100 "$dir/tiny.cal" >"$dir/cut.cal"
bad "cut.cal" "${TINY[@]}" -o "emulate.calibration=$dir/cut.cal"
bad "[emulate] calibration: $dir/none.cal" "${TINY[@]}" -o "emulate.calibration=$dir/none.cal"
echo "bad input: ok"
echo "timing_model: ok"
