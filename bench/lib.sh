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

# Busy jiffies of all CPUs (user nice system irq softirq).
busy_jiffies () { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }

# other_cpus CMD...: runs CMD (its output thrown away) and prints the CPUs
# that other processes of this machine kept busy on average meanwhile (0:
# a quiet machine, 1: a neighbour had a whole core).  Returns CMD's status.
other_cpus () {
  local tf b0 b1 rc hz
  hz=$(getconf CLK_TCK)
  tf=$(mktemp)
  b0=$(busy_jiffies)
  /usr/bin/time -f '%U %S %e' -o "$tf" "$@" >/dev/null 2>&1
  rc=$?
  b1=$(busy_jiffies)
  tail -n 1 "$tf" | awk -v b0="$b0" -v b1="$b1" -v hz="$hz" '{
      other = $3 > 0 ? ((b1 - b0) / hz - $1 - $2) / $3 : 0
      printf "%.2f\n", other < 0 ? 0 : other }'
  rm -f "$tf"
  return $rc
}
