# Shared by the bench scripts that time `shoal run`: sourced, not run.

# median samples/s of the train windows after the first of a run's metrics
rate () {
  /usr/bin/python3 - "$1" <<'PY'
import json, statistics, sys
r = [json.loads(l) for l in open(sys.argv[1])]
s = [x["samples_per_sec"] for x in r if x["phase"] == "train" and x["worker"] == 0][1:]
print(f"{statistics.median(s):.1f}" if s else "-")
PY
}

median () { sort -g | awk '{ v[NR] = $1 } END { print NR ? (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) : "-" }'; }
