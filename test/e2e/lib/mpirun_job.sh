# Shared by the e2e scripts that start a job's ranks under mpirun with
# processes left to clean up (rejoin_mpirun.sh, resume_mpirun.sh;
# sourced, not run): skips the script (exit 77) without mpirun, makes
# $dir, and on exit kills the mpirun whose pid the script keeps in $mpi
# (empty once waited for) and every process whose command line names
# $dir (the ranks), then removes $dir.
if ! command -v mpirun >/dev/null; then
  echo "SKIP: mpirun not found (install the Debian package openmpi-bin)"
  exit 77
fi
dir=$(mktemp -d)
mpi=
cleanup() {
  [ -n "$mpi" ] && kill "$mpi" 2>/dev/null
  local pids
  pids=$(pgrep -f -- "$dir/" || true)
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
