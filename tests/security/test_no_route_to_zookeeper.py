"""Nothing a client does needs the epoch store: the tools, the client API and a Spark job
work against a secured cluster from processes that cannot reach the ZooKeeper port at all.

The wall is an iptables rule that rejects TCP to ZooKeeper from sockets of one group id;
the client side runs as root in that group (it still reads the config and certificates),
the nodes do not.  The test first shows the wall holds.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest

from tests.security.conftest import credentials, zk_root

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

#: The group id the client side runs as (no group on the machine uses it).
WALLED_GID = 48_151


def _in_walled_group() -> None:  # preexec_fn: runs in the child before exec
    os.setgroups([])
    os.setgid(WALLED_GID)


def walled(args: list[str], *, stdin: str | None = None, timeout: float = 120
           ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=_in_walled_group)


def tool(name: str) -> str:
    return os.path.join(os.path.dirname(sys.executable), name)


@pytest.fixture
def zookeeper_wall(cluster):
    host_port = zk_root(cluster)[0].split(",")[0]
    host, port = host_port.rsplit(":", 1)
    rule = ["OUTPUT", "-p", "tcp", "-d", host, "--dport", port, "-m", "owner",
            "--gid-owner", str(WALLED_GID), "-j", "REJECT", "--reject-with", "tcp-reset"]
    subprocess.run(["iptables", "-I", *rule], check=True, capture_output=True)
    try:
        yield host, int(port)
    finally:
        subprocess.run(["iptables", "-D", *rule], check=True, capture_output=True)


def test_tools_and_clients_never_need_zookeeper(cluster, zookeeper_wall):
    host, port = zookeeper_wall
    probe = f"import socket; socket.create_connection(({host!r}, {port}), timeout=5)"
    blocked = walled([sys.executable, "-c", probe])
    assert blocked.returncode != 0 and "ConnectionRefusedError" in blocked.stderr
    socket.create_connection((host, port), timeout=5).close()  # the nodes' side is open

    cfg = ["--config", str(cluster.config_path)]
    admin = credentials(cluster, "admin")
    writer = credentials(cluster, "writer")
    ldshell = [tool("ldshell"), *cfg, "--timeout", "5", *admin]
    made = walled([*ldshell, "logs", "create", "walled", "--range", "900..909",
                   "--replication", "2"])
    assert made.returncode == 0, made.stderr
    wrote = walled([tool("ldwrite"), *cfg, *writer, "--log", "900", "--quiet"],
                   stdin="".join(f"line {i}\n" for i in range(50)))
    assert wrote.returncode == 0, wrote.stderr
    read = walled([tool("ldcat"), *cfg, *writer, "--log", "900"])
    assert read.returncode == 0, read.stderr
    assert read.stdout.splitlines() == [f"line {i}" for i in range(50)]
    status = walled([*ldshell, "query", "SELECT log_id, epoch FROM epoch_store "
                     "WHERE log_id = 900", "--json"])
    assert status.returncode == 0, status.stderr
    assert [r["log_id"] for r in json.loads(status.stdout)] == [900]
    check = walled([*ldshell, "check", "--recheck-delay", "0.2", "--json"])
    assert check.returncode == 0, check.stdout + check.stderr
    assert json.loads(check.stdout)["violations"] == {
        "placement": 0, "durability": 0, "progress": 0, "availability": 0}
    # Checkpoints, consumer groups and the reader through the Python API.
    script = textwrap.dedent(f"""
        import logdevice as ld
        with ld.Client({str(cluster.config_path)!r}, tls_cert={writer[1]!r},
                       tls_key={writer[3]!r}) as c:
            tail = c.get_tail_lsn(900)
            c.store_checkpoints("walled-consumer", {{900: (tail, 0)}})
            assert c.load_checkpoints("walled-consumer") == {{900: (tail, 0)}}
            gen, logs = c.group_heartbeat("walled-group", "m1", [900])
            assert logs == [900], logs
            r = c.create_reader()
            r.start_reading(900, ld.LSN_OLDEST, tail)
            got = [x for x in r.read(100, timeout=10) if isinstance(x, ld.DataRecord)]
            assert len(got) == 50, len(got)
        print("ok")
    """)
    api = walled([sys.executable, "-c", script])
    assert api.returncode == 0 and api.stdout.strip() == "ok", api.stderr
    removed = walled([*ldshell, "logs", "remove", "walled"])
    assert removed.returncode == 0, removed.stderr


def test_spark_reads_and_writes_without_zookeeper(cluster, zookeeper_wall):
    """A Spark job (driver, JVM and Python workers, all in the walled group) writes and
    reads a secured cluster with a principal's certificate."""
    from tests.security.conftest import client_as

    with client_as(cluster, "admin") as admin:
        admin.create_log_group("spark_walled", 950, 951, replication=2)
    cert, key = cluster.client_cert("writer")
    script = textwrap.dedent(f"""
        import os, sys
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
        os.environ["PYSPARK_PYTHON"] = sys.executable
        from pyspark.sql import SparkSession
        import logdevice.spark
        spark = (SparkSession.builder.master("local[1]")
                 .config("spark.ui.enabled", "false")
                 .config("spark.driver.host", "127.0.0.1")
                 .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
        logdevice.spark.register(spark)
        creds = {{"config": {str(cluster.config_path)!r}, "tls_cert": {str(cert)!r},
                  "tls_key": {str(key)!r}}}
        (spark.range(100).selectExpr("cast(concat('w-', id) as binary) as payload")
         .write.format("logdevice").options(log="950", **creds).mode("append").save())
        n = spark.read.format("logdevice").options(logs="950", **creds).load().count()
        print("rows", n)
        spark.stop()
    """)
    job = walled([sys.executable, "-c", script], timeout=240)
    assert job.returncode == 0, job.stderr[-3000:]
    assert "rows 100" in job.stdout
    with client_as(cluster, "admin") as admin:
        admin.remove_log_group("spark_walled")
