"""TLS contexts from the config's ``security.tls`` section.

A node serves with ``server_context`` (its certificate; client certificates verified
against the CA when presented, required with ``require_client_cert``) and dials its peers
with ``client_context`` carrying the same certificate, which is how peers tell a node
from a client.  Clients dial with ``client_context`` and, optionally, a certificate of
their own.  Every dial checks the node's certificate against the CA and the host name
the config gives the node.  A file that cannot be loaded is an error naming its field.
"""

from __future__ import annotations

import ssl

from logdevice.config import Config, TlsConfig
from logdevice.errors import InvalidConfigError, InvalidParamError

__all__ = ["server_context", "client_context"]


def _tls(config: Config) -> TlsConfig:
    if config.security is None or config.security.tls is None:
        raise ValueError(f"the config of cluster {config.cluster!r} has no security.tls")
    return config.security.tls


def _config_error(config: Config, field: str, path: str, exc: Exception) -> InvalidConfigError:
    return InvalidConfigError(message=f"{config.source or '<config dict>'}: security.tls.{field}"
                                      f": cannot load {config.resolve_path(path)}: {exc}")


def _load_ca(ctx: ssl.SSLContext, config: Config, tls: TlsConfig) -> None:
    try:
        ctx.load_verify_locations(cafile=str(config.resolve_path(tls.ca)))
    except (OSError, ssl.SSLError) as exc:
        raise _config_error(config, "ca", tls.ca, exc) from None


def _load_node_cert(ctx: ssl.SSLContext, config: Config, tls: TlsConfig) -> None:
    try:
        ctx.load_cert_chain(str(config.resolve_path(tls.cert)),
                            str(config.resolve_path(tls.key)))
    except (OSError, ssl.SSLError) as exc:
        raise _config_error(config, "cert", f"{tls.cert} / {tls.key}", exc) from None


def server_context(config: Config) -> ssl.SSLContext:
    """What a node serves its port with."""
    tls = _tls(config)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_node_cert(ctx, config, tls)
    _load_ca(ctx, config, tls)
    ctx.verify_mode = ssl.CERT_REQUIRED if tls.require_client_cert else ssl.CERT_OPTIONAL
    return ctx


def client_context(config: Config, cert: str | None = None, key: str | None = None, *,
                   ca: str | None = None, as_node: bool = False) -> ssl.SSLContext:
    """What a client (``cert``/``key``: its own certificate, optional; ``ca``: the CA file
    to trust instead of the config's) or, with ``as_node``, a node dialing a peer (the
    node certificate) connects with."""
    tls = _tls(config)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies the server and its host name
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if ca is None:
        _load_ca(ctx, config, tls)
    else:
        try:
            ctx.load_verify_locations(cafile=ca)
        except (OSError, ssl.SSLError) as exc:
            raise InvalidParamError(message=f"tls_ca {ca}: cannot load: {exc}") from None
    if as_node:
        _load_node_cert(ctx, config, tls)
    elif cert is not None:
        try:
            ctx.load_cert_chain(cert, key)
        except (OSError, ssl.SSLError) as exc:
            raise InvalidParamError(message=f"tls_cert {cert} / tls_key {key}: cannot load: "
                                            f"{exc}") from None
    elif key is not None:
        raise InvalidParamError(message="tls_key without tls_cert")
    return ctx
