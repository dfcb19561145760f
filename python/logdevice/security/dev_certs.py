"""Certificates for test and development clusters: a throwaway CA and what it issues.

``DevCertificates(folder)`` makes a CA with ``trustme`` (a test dependency, imported on
use) and writes it to ``folder/ca.pem``; ``node_cert`` issues the nodes' certificate (CN
``NODE_SUBJECT``, valid for the given addresses) and ``client_cert`` a client certificate
whose CN is a principal's name.  Every certificate and key is a PEM file in ``folder``:
what the config's ``security.tls`` section and the tools' ``--tls-cert`` options name.
Nothing here is for a real deployment: its CA's key lives only in this process.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["NODE_SUBJECT", "DevCertificates"]

#: The CN of the node certificate of a cluster with ``tls=True``.
NODE_SUBJECT = "logdevice-node"


class DevCertificates:
    """A CA made for one cluster, and the certificates it issued, under ``folder``.

    RuntimeError when ``trustme`` is not installed.
    """

    def __init__(self, folder: Path) -> None:
        try:
            import trustme  # optional (the "test" extra): only TLS test clusters need it
        except ImportError:
            raise RuntimeError("LocalCluster(tls=True) needs trustme (pip install "
                               "trustme, or the package's test extra)") from None
        self.folder = folder
        folder.mkdir(exist_ok=True)
        self._ca: Any = trustme.CA()
        self.ca_path = folder / "ca.pem"
        self._ca.cert_pem.write_to_path(str(self.ca_path))

    def node_cert(self, hosts: Iterable[str]) -> tuple[Path, Path]:
        """The nodes' certificate (CN ``NODE_SUBJECT``, valid for every one of ``hosts``)
        with its chain: ``(cert_path, key_path)``."""
        cert, key = self.folder / "node.pem", self.folder / "node.key"
        node = self._ca.issue_cert(*dict.fromkeys(hosts), common_name=NODE_SUBJECT)
        node.private_key_pem.write_to_path(str(key))
        with open(cert, "wb") as f:
            for blob in node.cert_chain_pems:
                f.write(blob.bytes())
        return cert, key

    def client_cert(self, name: str) -> tuple[Path, Path]:
        """A client certificate for principal ``name`` (its CN): ``(cert_path, key_path)``,
        issued once and kept."""
        cert = self.folder / f"client-{name}.pem"
        key = self.folder / f"client-{name}.key"
        if not cert.exists():
            leaf = self._ca.issue_cert(f"{name}.client.invalid", common_name=name)
            leaf.private_key_pem.write_to_path(str(key))
            leaf.cert_chain_pems[0].write_to_path(str(cert))
        return cert, key
