#!/usr/bin/env bash
# `shoal import` as users run it: exit codes, exact messages, --force, and
# no progress bar when stderr is not a terminal.
set -u
build=${1:-build}
shoal="$build/shoal"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 3 images of 2x2 pixels and their labels, as IDX files
printf '\x00\x00\x08\x03\x00\x00\x00\x03\x00\x00\x00\x02\x00\x00\x00\x02' > "$tmp/img"
printf '\x00\x01\x02\x03\x10\x11\x12\x13\xf0\xf1\xf2\xf3' >> "$tmp/img"
printf '\x00\x00\x08\x01\x00\x00\x00\x03\x07\x08\x09' > "$tmp/lab"
gzip -c "$tmp/img" > "$tmp/img.gz"
head -c 24 "$tmp/img" | gzip -c > "$tmp/short.gz"

out=$("$shoal" import idx --images "$tmp/img.gz" --labels "$tmp/lab" --out "$tmp/ds" 2>"$tmp/err")
[ $? -eq 0 ] || fail "import: $(cat "$tmp/err")"
[[ "$out" == "$tmp/ds: 3 records of 1x2x2 pixels, "*" MiB, in "*" s" ]] || fail "summary: $out"
[ -s "$tmp/err" ] && fail "stderr not empty without a terminal: $(cat "$tmp/err")"

"$shoal" import idx --images "$tmp/img" --labels "$tmp/lab" --out "$tmp/ds" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] || fail "a second import into $tmp/ds did not fail"
grep -qxF "shoal import idx: $tmp/ds exists and is not empty; use --force to replace the dataset in it" "$tmp/err" \
  || fail "refusal: $(cat "$tmp/err")"
"$shoal" import idx --images "$tmp/img" --labels "$tmp/lab" --out "$tmp/ds" --force >/dev/null \
  || fail "--force"

"$shoal" import idx --images "$tmp/short.gz" --labels "$tmp/lab" --out "$tmp/cut" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] || fail "a truncated file was imported"
grep -qxF "shoal import idx: $tmp/short.gz: truncated: expected 3 images, file holds 2" "$tmp/err" \
  || fail "truncation: $(cat "$tmp/err")"
[ -e "$tmp/cut" ] && fail "a failed import left $tmp/cut behind"

"$shoal" import idx --images "$tmp/lab" --labels "$tmp/lab" --out "$tmp/magic" >/dev/null 2>"$tmp/err"
grep -qxF "shoal import idx: $tmp/lab: not an IDX image file: magic 0x00000801, expected 0x00000803" "$tmp/err" \
  || fail "magic: $(cat "$tmp/err")"

"$shoal" import idx --images "$tmp/img" --out "$tmp/x" >/dev/null 2>&1
[ $? -eq 2 ] || fail "missing --labels is not a usage error"
"$shoal" import tiff >/dev/null 2>&1
[ $? -eq 2 ] || fail "an unknown format is not a usage error"

printf 'x,label,y\n1.5,4,2\n3,0,-1\n' > "$tmp/d.csv"
out=$("$shoal" import csv --in "$tmp/d.csv" --out "$tmp/csv" --label-column 1 --skip-header) \
  || fail "csv import"
[[ "$out" == "$tmp/csv: 2 records of 2 floats, "* ]] || fail "csv summary: $out"
# NaN and infinities are errors naming line and column, and nothing is left behind
printf 'x,label,y\n1.5,4,2\n3,0,nan\n' > "$tmp/nan.csv"
"$shoal" import csv --in "$tmp/nan.csv" --out "$tmp/nan" --label-column 1 --skip-header >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] || fail "a CSV with nan was imported"
grep -qxF "shoal import csv: $tmp/nan.csv:3: column 2: 'nan' is not a number (NaN cannot be trained on)" "$tmp/err" \
  || fail "nan: $(cat "$tmp/err")"
[ -e "$tmp/nan/data.mdb" ] && fail "a failed import left $tmp/nan/data.mdb behind"
printf '1,inf\n' > "$tmp/inf.csv"
"$shoal" import csv --in "$tmp/inf.csv" --out "$tmp/inf" --label-column 0 >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] || fail "a CSV with inf was imported"
grep -qxF "shoal import csv: $tmp/inf.csv:1: column 1: 'inf' is infinite (cannot be trained on)" "$tmp/err" \
  || fail "inf: $(cat "$tmp/err")"
echo "import: all checks passed"
