"""The files in deploy/ stay usable: the config template, stripped of its comment lines,
is a valid, secured config (without its security section a node would refuse it); the
systemd unit runs logdeviced with arguments it accepts."""

import json
import re
from pathlib import Path

from logdevice.config import Config
from logdevice.node.main import _parser
from logdevice.node.transport.access import exposure_refusal

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_config_template_is_a_valid_config():
    text = (DEPLOY / "cluster.jsonc").read_text()
    stripped = "\n".join(line for line in text.splitlines()
                         if not re.match(r"^\s*//", line))
    cfg = Config.from_dict(json.loads(stripped), source="cluster.jsonc")
    assert cfg.epoch_store_uri.startswith("zookeeper:")
    assert len({n.host for n in cfg.nodes}) == 3
    assert cfg.settings.frame_timeout_ms == 30000
    sec = cfg.security
    assert sec is not None and sec.tls is not None and sec.zookeeper is not None
    assert sec.acl.trim == ("ops",) and sec.acl.admin == ("ops",)
    assert exposure_refusal(cfg) is None
    bare = json.loads(stripped)
    del bare["security"]
    assert "security" in exposure_refusal(Config.from_dict(bare, source="cluster.jsonc"))
    bare["security"] = {"insecure": True}
    assert exposure_refusal(Config.from_dict(bare, source="cluster.jsonc")) is None


def test_systemd_unit_runs_logdeviced_with_valid_arguments():
    unit = (DEPLOY / "logdeviced@.service").read_text()
    (exec_start,) = re.findall(r"^ExecStart=(.*)$", unit, re.M)
    argv = exec_start.replace("%i", "0").split()
    assert argv[0].endswith("/logdeviced")
    args = _parser().parse_args(argv[1:])
    assert args.node_index == 0 and args.config == "/etc/logdevice/cluster.json"
    assert "RestartPreventExitStatus=2" in unit  # a bad config is not retried forever
