#!/usr/bin/env bash
# The whole test suite, as CI runs it.  Extra arguments go to pytest.
set -euo pipefail
bash ci/lint.sh
bash ci/docs.sh
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
