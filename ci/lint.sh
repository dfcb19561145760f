#!/usr/bin/env bash
# Static checks: ruff for the Python, cython-lint for the kernels, mypy for the package.
set -euo pipefail
export PATH="$PWD/.venv/bin:$PATH"   # cython-lint runs pycodestyle from PATH
ruff check python tests benchmarks docs spark
cython-lint --max-line-length 100 src/ldcore/*.pyx src/ldcore/*.pxd
mypy
