#!/usr/bin/env bash
# Static checks: ruff for the Python, cython-lint for the kernels, mypy for the package, and
# a grep for pointers outside the project.
set -euo pipefail
export PATH="$PWD/.venv/bin:$PATH"   # cython-lint runs pycodestyle from PATH
ruff check python tests benchmarks docs spark
cython-lint --max-line-length 100 src/ldcore/*.pyx src/ldcore/*.pxd
mypy
# The project stands on its own: no pointer to a tracker's issues or to documents it does
# not ship.  The brackets keep the pattern from matching itself.
outside='[Ii]ssue ?#?[0-9]+|(^|[^&[:alnum:]])#[0-9]+\b|[Tt]he track[e]r|DESIGN[.]md|REFERENCE[.]md'
outside+="|\b[Tt]he see[d]s?\b|\bsee[d]s/|\bsee[d]'s|the issu[e]'s"
if grep -rnIE "$outside" --exclude-dir=.git --exclude-dir=.venv --exclude-dir=.make \
     --exclude-dir=build --exclude-dir=dist --exclude-dir=_build --exclude-dir=__pycache__ \
     --exclude-dir='*.egg-info' --exclude='*.so' --exclude='*.c' --exclude='last-*' .; then
  echo "ci/lint.sh: the lines above point outside the project (a tracker, a document it" \
       "does not ship): say what the code does or why instead" >&2
  exit 1
fi
