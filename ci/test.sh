#!/usr/bin/env bash
# The whole test suite, as CI runs it.  Extra arguments go to pytest.
# The wheel step (a minute or so) builds the repaired wheel into dist/ and runs the demo and
# the console scripts from it in a fresh venv (ci/wheel.sh, ci/wheel-smoke.sh);
# LD_TEST_WHEEL=0 skips it.
set -euo pipefail
bash ci/lint.sh
bash ci/docs.sh
if [ "${LD_TEST_WHEEL:-1}" = 1 ]; then
  bash ci/wheel.sh
  bash ci/wheel-smoke.sh
fi
exec .venv/bin/python -m pytest -q -p no:cacheprovider --durations=20 "$@"
