#!/usr/bin/env bash
# The project's virtual environment: .venv with the build tools, then logdevice itself
# (editable, so src/ldcore and python/logdevice are imported from the work tree).
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
  "setuptools>=77" wheel "Cython>=3.0" "numpy>=2.0" "cffi>=1.16"
.venv/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation -e ".[server,cli,test,dev,bench,admin,zookeeper,spark]"
