# Sourced first by the e2e scripts that need root (network namespaces,
# slurmd): a runner with password-less sudo runs the script again under
# it; otherwise the script goes on as it is and says SKIP where root is
# missing.  Usage: source "$(dirname "$0")/lib/as_root.sh" "$@"
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  exec sudo -n -E bash "$0" "$@"
fi
