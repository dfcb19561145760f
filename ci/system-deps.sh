#!/usr/bin/env bash
# Debian packages the build, the tests and the benchmarks need. Installs only what is missing,
# so a second run does nothing.
set -euo pipefail

PACKAGES=(
  build-essential pkg-config make     # compilers for the Cython kernels and the cffi binding
  librocksdb-dev                      # LogsDB's storage engine (headers + shared library)
  libzstd-dev                         # the codec links libzstd directly
  python3-venv                        # .venv on a stock Debian Python
  zookeeper                           # a real ZooKeeper (and a JRE) for the zookeeper: store tests
  redis-server                        # peer system in the write and peer benchmarks
  nats-server                         # NATS JetStream, peer system in benchmarks/peers.py
  iptables                            # tests that cut links (a client with no route to ZooKeeper)
  iproute2                            # ip netns: the chaos runs with network partitions
)
[ "${LD_WITH_BENCH_PEERS:-1}" = 1 ] || PACKAGES=("${PACKAGES[@]/redis-server}")
[ "${LD_WITH_BENCH_PEERS:-1}" = 1 ] || PACKAGES=("${PACKAGES[@]/nats-server}")

missing=()
for p in "${PACKAGES[@]}"; do
  [ -n "$p" ] || continue
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing system packages: ${missing[*]}"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
