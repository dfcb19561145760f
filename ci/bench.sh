#!/usr/bin/env bash
# Benchmarks: the pytest-benchmark suites (each prints a ratio table against references
# measured in the same run, also written to benchmarks/last-run.md), then the end-to-end
# write path with its anchors (benchmarks/last-write-path.md) and the read path
# (ldbench read: a 10 M-record backfill, SCD vs all-send-all in the same run; and records
# appended one at a time, benchmarks/last-plain-read.md), then the
# cost of each append_store_durability level (benchmarks/last-durability.md), the
# cluster checker on a 10 M-record log (benchmarks/last-checker.md), rebuilding a lost node
# of a 3- and a 5-node cluster holding 10 M records (benchmarks/last-rebuilding.md), the
# write path with TLS on vs off (benchmarks/last-tls.md), a node under 100 hostile
# connections while a writer appends (benchmarks/last-hostile.md), appends around a hung
# sequencer (benchmarks/last-failover.md), what each log costs at 1,000 to 100,000 logs
# (benchmarks/last-many-logs.md), CPU per record one record at a time against
# Redis and NATS (benchmarks/last-cpu-per-record.md), and ours against Redis
# Streams and NATS JetStream on the same workloads (benchmarks/peers.py: benchmarks/last-peers.md, plots
# in benchmarks/plots/last-peers-*.png).
# Arguments go to pytest.
# LD_BENCH_E2E=0 skips the end-to-end part; LD_WITH_BENCH_PEERS=0 (no redis-server nor
# nats-server installed by ci/system-deps.sh) runs it without the Redis Streams anchor and
# without benchmarks/peers.py.  LD_PEERS_ARGS goes to benchmarks/peers.py (e.g.
# LD_PEERS_ARGS=--quick for a run of about a minute; LD_PEERS_RECORDS sets its backfill
# size, default 10 M).
# LD_BENCH_SPARK=1 adds the Spark read path (benchmarks/spark_read.py, 10 M records by
# default, LD_BENCH_SPARK_RECORDS to change), the sink exactly once and at least once
# against a BufferedWriter (benchmarks/spark_write.py) and planning a read of 10,000 logs
# (benchmarks/spark_plan.py); several minutes more.
set -euo pipefail
# numpy's BLAS threads spin between calls and steal the second core from the code measured
export OPENBLAS_NUM_THREADS=1
.venv/bin/python -m pytest -q -p no:cacheprovider benchmarks --benchmark-only \
  --benchmark-columns=median,ops,rounds --benchmark-sort=name "$@"
if [ "${LD_BENCH_E2E:-1}" = 1 ]; then
  peers=()
  [ "${LD_WITH_BENCH_PEERS:-1}" = 1 ] || peers=(--no-redis)
  .venv/bin/python benchmarks/write_path.py "${peers[@]}"
  .venv/bin/python -m logdevice.tools.ldbench read --records "${LD_BENCH_READ_RECORDS:-10000000}" \
    --json benchmarks/last-read-path.json
  .venv/bin/python benchmarks/plain_read.py  # records appended one at a time
  .venv/bin/python benchmarks/durability.py
  .venv/bin/python benchmarks/checker.py  # LD_CHECKER_RECORDS (default 10 M)
  .venv/bin/python benchmarks/epoch_activation.py  # ZooKeeper vs SQLite epoch store
  .venv/bin/python benchmarks/rebuilding.py  # LD_REBUILD_RECORDS (default 10 M)
  .venv/bin/python benchmarks/tls.py  # TLS on vs off; LD_TLS_RECORDS (default 1 M)
  .venv/bin/python benchmarks/hostile.py  # 100 hostile connections vs a 1,000/s writer
  .venv/bin/python benchmarks/failover.py  # appends around a hung (SIGSTOP) sequencer
  .venv/bin/python benchmarks/many_logs.py  # 1,000 to 100,000 logs: what each log costs
  if [ "${LD_WITH_BENCH_PEERS:-1}" = 1 ]; then
    .venv/bin/python benchmarks/cpu_per_record.py  # one record at a time, vs Redis and NATS
    # shellcheck disable=SC2086  # LD_PEERS_ARGS is a list of arguments
    .venv/bin/python benchmarks/peers.py ${LD_PEERS_ARGS:-}
  fi
fi
if [ "${LD_BENCH_SPARK:-0}" = 1 ]; then
  .venv/bin/python benchmarks/spark_read.py --json benchmarks/last-spark-read.json
  .venv/bin/python benchmarks/spark_write.py
  .venv/bin/python benchmarks/spark_plan.py
fi
