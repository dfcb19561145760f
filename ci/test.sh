#!/usr/bin/env bash
# The whole test suite, as CI runs it.  Extra arguments go to pytest.
set -euo pipefail
.venv/bin/ruff check python tests benchmarks spark
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
