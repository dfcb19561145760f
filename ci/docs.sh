#!/usr/bin/env bash
# The documentation site: Sphinx over docs/, warnings (broken references, bad markup)
# are errors.  The configuration and command-line references are generated from the code.
set -euo pipefail
.venv/bin/sphinx-build -W --keep-going -q -b html docs docs/_build/html
echo "docs: docs/_build/html/index.html"
