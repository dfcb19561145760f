#!/usr/bin/env bash
# The built wheel (dist/, ci/wheel.sh) as a user gets it: a fresh venv in a temporary
# directory outside the source tree (nothing of the tree is importable), the wheel with the
# server and cli extras and their dependencies from PyPI, then
# - logdevice, ldcore and the RocksDB binding import from the venv, with the libraries the
#   wheel vendors (librocksdb, libzstd, ...) loaded from it, none from Debian's librocksdb;
# - every console script of the wheel answers --version;
# - the demo (`make run`) writes and reads LD_SMOKE_RECORDS records (default 100000) on a
#   local cluster and exits 0 (every record read back, every blob on its R nodes); where a
#   mount namespace can be made (root), with Debian's librocksdb hidden behind an empty
#   file, as on a machine that does not have it.
set -euo pipefail
cd "$(dirname "$0")/.."
wheels=(dist/logdevice-*.whl)
if [ ${#wheels[@]} -ne 1 ] || [ ! -e "${wheels[0]}" ]; then
  echo "wheel-smoke: expected one wheel in dist/ (make wheel), found: ${wheels[*]}" >&2
  exit 1
fi
whl=$PWD/${wheels[0]}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ld-wheel-smoke.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
unset PYTHONPATH LD_LIBRARY_PATH

# .venv's interpreter makes a venv on its base installation: none of .venv's packages
.venv/bin/python -m venv "$tmp/venv"
py=$tmp/venv/bin/python
"$py" -m pip install -q "$whl[server,cli]"

cd "$tmp"
"$py" - <<'EOF'
import os
import sys

import ldcore.codec
import logdevice
import logdevice._rocksdb

for m in (ldcore.codec, logdevice, logdevice._rocksdb):
    assert m.__file__.startswith(sys.prefix + "/"), f"{m.__name__} from {m.__file__}"
libs = os.path.join(os.path.dirname(os.path.dirname(logdevice.__file__)), "logdevice.libs")
stems = {name.split("-")[0] for name in os.listdir(libs)}  # librocksdb-<hash>.so.7.8.3
with open("/proc/self/maps") as f:
    mapped = {line.split()[-1] for line in f if ".so" in line}
ours = {p for p in mapped if p.startswith(libs + "/")}
assert {os.path.basename(p).split("-")[0] for p in ours} == stems, (stems, ours)
# (the interpreter's own modules may load Debian's libbz2 or libzstd besides, by another
# soname; nothing but the wheel loads a librocksdb)
system = [p for p in mapped - ours if "librocksdb" in p]
assert not system, f"loaded from the system instead of the wheel: {system}"
EOF
scripts=$("$py" -c 'from importlib.metadata import distribution
print(" ".join(e.name for e in distribution("logdevice").entry_points
               if e.group == "console_scripts"))')
for s in $scripts; do
  "$tmp/venv/bin/$s" --version
done
demo=("$py" -m logdevice.demo --records "${LD_SMOKE_RECORDS:-100000}")
hide=$( (ldconfig -p 2>/dev/null || /sbin/ldconfig -p) | awk '/librocksdb\.so/ {print $NF}' |
        xargs -r readlink -f | sort -u || true)
where="Debian's librocksdb present"
if [ -n "$hide" ] && unshare -m --propagation private true 2>/dev/null; then
  demo=(unshare -m --propagation private bash -c \
        'set -e; for f in $LD_HIDE; do mount --bind /dev/null "$f"; done; exec "$@"' _ "${demo[@]}")
  where="Debian's librocksdb hidden"
fi
if ! LD_HIDE="$hide" "${demo[@]}" >"$tmp/demo.log" 2>&1; then
  cat "$tmp/demo.log" >&2
  echo "wheel-smoke: the demo failed against the installed wheel ($where)" >&2
  exit 1
fi
echo "demo ($where):"
grep -E "records in|every blob" "$tmp/demo.log" || true
echo "wheel-smoke: $(basename "$whl") ok"
