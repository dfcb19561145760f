"""What ``import logdevice`` loads: the client, not the node.

A client process (an application, a Spark executor) pays for every module the package
import drags in.  The node's parts (roles, sequencer, rebuilding, storage, checker), the
tools, the Spark source and the epoch store itself (clients never open it: they decode
a node's replies into its value types) load only when used; ``LocalCluster``, which
runs node processes, on first use of the name.  Each check runs in a fresh interpreter,
so what other tests imported does not count.
"""

from __future__ import annotations

import subprocess
import sys

#: Packages and modules of logdevice no client needs.
NOT_FOR_CLIENTS = (
    "logdevice.node", "logdevice.sequencer", "logdevice.rebuilding", "logdevice.checker",
    "logdevice.storage", "logdevice.spark", "logdevice.tools", "logdevice.local_cluster",
    "logdevice.logs_config_store", "logdevice.security.store", "logdevice.security.dev_certs",
    "logdevice.epochstore.base", "logdevice.epochstore.backends",
    "logdevice.epochstore.sqlite", "logdevice.epochstore.zookeeper",
    "logdevice.epochstore.groups",
)


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          timeout=120, check=False)


def _loaded_after(code: str) -> list[str]:
    p = _python("-c", f"{code}\nimport sys\nprint('\\n'.join(sorted(sys.modules)))")
    assert p.returncode == 0, p.stderr
    return p.stdout.split()


def _not_for_clients(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in NOT_FOR_CLIENTS)]


def test_import_logdevice_loads_the_client_only():
    loaded = _loaded_after("import logdevice")
    assert "logdevice.client" in loaded and "logdevice.epochstore.records" in loaded
    assert _not_for_clients(loaded) == []


def test_the_check_sees_what_local_cluster_loads():
    loaded = _loaded_after("import logdevice\nlogdevice.LocalCluster")
    assert {"logdevice.local_cluster", "logdevice.security.dev_certs",
            "logdevice.epochstore.sqlite"} <= set(_not_for_clients(loaded))


def test_local_cluster_is_still_a_public_name():
    p = _python("-c", "import sys, logdevice\n"
                      "print('LocalCluster' in dir(logdevice), 'LocalCluster' in logdevice.__all__,"
                      " 'logdevice.local_cluster' in sys.modules)\n"
                      "from logdevice import LocalCluster\n"
                      "from logdevice.local_cluster import LocalCluster as real\n"
                      "print(LocalCluster is real is logdevice.LocalCluster)")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["True", "True", "False", "True"]


def test_the_epoch_store_package_names_resolve():
    # The store and its backends load on first use of their names, as the real classes.
    p = _python("-c", "import sys\n"
                      "from logdevice.epochstore import *\n"
                      "import logdevice.epochstore as es\n"
                      "from logdevice.epochstore.sqlite import FileEpochStore as F\n"
                      "assert FileEpochStore is F and issubclass(F, EpochStore)\n"
                      "print(all(getattr(es, n) is not None for n in es.__all__))\n"
                      "es.no_such_name")
    assert p.stdout.split() == ["True"], p.stderr
    assert "AttributeError: module 'logdevice.epochstore' has no attribute 'no_such_name'" \
        in p.stderr


def test_tools_run_as_modules():
    for module, prog in (("logdevice.tools.ldshell", "ldshell"),
                         ("logdevice.tools.dev_cluster", "ld-dev-cluster")):
        p = _python("-m", module, "--help")
        assert p.returncode == 0, p.stderr
        assert p.stdout.startswith(f"usage: {prog} "), p.stdout
