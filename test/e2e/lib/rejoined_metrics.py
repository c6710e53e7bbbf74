# Run by the rejoin scripts (test/e2e/rejoin.sh, rejoin_mpirun.sh) on the
# metrics.jsonl of a two-group job whose group 1 was killed and rejoined:
# group 1 has two step-20 train lines (the killed process's, the rejoined
# one's), the rejoined one started from the current values (a lower
# loss), and both groups end at step 600 above the bar.
# Usage: rejoined_metrics.py METRICS.jsonl
import json
import sys

lines = [json.loads(l) for l in open(sys.argv[1])]
first20 = [r["loss"] for r in lines if r.get("group") == 1 and r["phase"] == "train" and r["step"] == 20]
assert len(first20) == 2, ("two step-20 lines of group 1 (the killed process, the rejoined one)", first20)
assert first20[1] < first20[0], ("the rejoined group did not start from the current values", first20)
for g in (0, 1):
    test = [r for r in lines if r.get("group") == g and r["phase"] == "test"]
    assert test and test[-1]["step"] == 600 and test[-1]["accuracy"] >= 0.78, (g, test[-1:])
    print("group %d: test accuracy %.4f at step 600" % (g, test[-1]["accuracy"]))
print("group 1's step 20: loss %.3f, rejoined %.3f" % tuple(first20))
