"""Command-line tools: ``ldwrite`` (lines into a log), ``ldbench`` (load generator), and
their shared helpers (``loglines``: synthetic log lines; ``benchutil``: percentiles,
clusters for benchmarks, result output)."""
