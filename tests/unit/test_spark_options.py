"""The Spark data source's options (no Spark session, no cluster): one registry of names
for batch reads, stream reads and writes, keys matched case- and underscore-blind, unknown
keys refused naming the valid ones, and the cluster config shipped as its document."""

from __future__ import annotations

import json
import os
import pickle
import re
from pathlib import Path

import pytest
from pyspark.sql.types import BinaryType, StructField, StructType

from logdevice.config import make_local_config
from logdevice.errors import E, InvalidConfigError, InvalidParamError
from logdevice.spark.options import (
    BATCH_READ,
    OPTIONS,
    STREAM_READ,
    WRITE,
    ReadOptions,
    ShippedConfig,
    option_values,
    parse_credentials,
    ship_config,
    with_shipped_config,
)
from logdevice.spark.sink import WriteOptions
from logdevice.spark.stream import StreamOptions

README = Path(__file__).resolve().parents[2] / "README.md"
PAYLOAD = StructType([StructField("payload", BinaryType())])


def config_doc(tmp_path: Path) -> dict:
    return make_local_config(2, 1, range(1, 5), root=tmp_path, ports=[4440, 4441]).to_dict()


@pytest.mark.parametrize("key", ["from_lsn", "fromLsn", "fromlsn", "FROM_LSN", "From_Lsn"])
def test_spellings_of_one_option_are_one_option(key):
    assert ReadOptions.parse({"config": "c", "logs": "1", key: "77"}).from_lsn == 77


def test_camel_case_options_of_streams_and_writes():
    o = StreamOptions.parse({"config": "c", "logs": "1-2", "maxRecordsPerTrigger": "5",
                             "startingOffsets": "latest", "failOnDataLoss": "false"})
    assert (o.max_records_per_trigger, o.starting_offsets, o.fail_on_data_loss) == (
        5, "latest", False)
    w = WriteOptions.parse({"config": "c", "log": "3", "sizeTrigger": "100",
                            "writeTimeout": "9"}, PAYLOAD)
    assert (w.log_id, dict(w.writer_options), w.timeout) == (3, {"size_trigger": 100}, 9.0)


def test_an_unknown_option_names_itself_the_closest_and_every_valid_one():
    with pytest.raises(InvalidParamError) as info:
        ReadOptions.parse({"config": "c", "logs": "1", "form_lsn": "5"})
    msg = str(info.value)
    assert info.value.status == E.INVALID_PARAM
    assert "unknown option 'form_lsn' for a logdevice batch read" in msg
    assert "did you mean 'from_lsn'?" in msg
    valid = sorted(n for n, uses in OPTIONS.items() if BATCH_READ in uses)
    assert ", ".join(valid) in msg
    with pytest.raises(InvalidParamError, match=r"unknown option 'nonsense'") as info:
        StreamOptions.parse({"config": "c", "logs": "1", "nonsense": "1"})
    assert "did you mean" not in str(info.value)
    assert "max_records_per_trigger" in str(info.value)


def test_an_option_of_another_use_says_whose_it_is():
    with pytest.raises(InvalidParamError, match=r"option 'from_lsn' is not used by a "
                                                r"stream read \(only by a batch read\)"):
        StreamOptions.parse({"config": "c", "logs": "1", "fromLsn": "3"})
    with pytest.raises(InvalidParamError, match=r"'logs' is not used by a write"):
        WriteOptions.parse({"config": "c", "log": "1", "logs": "1"}, PAYLOAD)


def test_what_spark_adds_is_not_an_unknown_option():
    # writeStream.option("checkpointLocation", ...) reaches the sink's options
    got = option_values({"config": "c", "log": "1", "checkpointlocation": "/ck"}, WRITE)
    assert got == {"config": "c", "log": "1"}
    # .load(path) / .save(path): this source has no path; say where the config goes
    for key in ("path", "paths"):
        with pytest.raises(InvalidParamError, match="takes no path.*option config"):
            option_values({"config": "c", "logs": "1", key: "/x"}, BATCH_READ)


def test_one_option_in_two_spellings_is_refused():
    with pytest.raises(InvalidParamError, match="from_lsn is given twice"):
        option_values({"from_lsn": "1", "fromlsn": "2"}, BATCH_READ)


def test_every_use_has_config_and_credentials():
    for use in (BATCH_READ, STREAM_READ, WRITE):
        names = {n for n, uses in OPTIONS.items() if use in uses}
        assert {"config", "config_json", "token", "token_file", "tls_cert", "tls_key",
                "tls_ca"} <= names


def test_the_readme_lists_every_option():
    text = README.read_text()
    section = text[text.index("## Using it from Spark"):]
    section = section[:section.index("\n## ", 3)]
    missing = [n for n in OPTIONS if not re.search(rf"`{n}`", section)]
    assert not missing, f"README's Spark section does not list {missing}"


def test_config_path_is_read_on_the_driver_and_shipped(tmp_path):
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(config_doc(tmp_path)))
    opts = ReadOptions.parse({"config": str(path), "logs": "1"})
    assert opts.config == str(path)  # parsing reads nothing
    shipped = with_shipped_config(opts)
    assert isinstance(shipped.config, ShippedConfig)
    assert shipped.config.base_dir == str(tmp_path.resolve())
    path.unlink()  # an executor without the file
    on_executor = pickle.loads(pickle.dumps(shipped))
    cfg = on_executor.config.load()
    assert cfg.cluster == "local" and len(cfg.nodes) == 2 and cfg.source is None
    assert with_shipped_config(on_executor) == on_executor  # already shipped
    with pytest.raises(InvalidParamError, match="option config: cannot read"):
        ship_config(str(path))


def test_config_json_is_the_document_checked_on_the_driver(tmp_path):
    doc = config_doc(tmp_path)
    opts = WriteOptions.parse({"configJson": json.dumps(doc), "log": "2"}, PAYLOAD)
    assert isinstance(opts.config, ShippedConfig)
    assert opts.config.base_dir == os.getcwd()
    assert opts.config.load().cluster == "local"
    assert "ShippedConfig(option config_json)" in repr(opts)  # not the whole document
    with pytest.raises(InvalidParamError, match="config .* or config_json .*not both"):
        ReadOptions.parse({"config": "c", "config_json": json.dumps(doc), "logs": "1"})
    with pytest.raises(InvalidParamError, match="config_json: not valid JSON"):
        ReadOptions.parse({"config_json": "{nope", "logs": "1"})
    doc["nodes"][0]["port"] = "many"
    with pytest.raises(InvalidConfigError, match=r"nodes\[0\].port"):
        ReadOptions.parse({"config_json": json.dumps(doc), "logs": "1"})
    with pytest.raises(InvalidParamError, match="needs option 'config'"):
        ReadOptions.parse({"logs": "1"})


def test_credential_paths_are_made_absolute_on_the_driver(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    creds = dict(parse_credentials({"tls_cert": "me.pem", "tls_key": "me.key",
                                    "tls_ca": "certs/ca.pem", "token": "t"}))
    assert creds == {"tls_cert": str(tmp_path / "me.pem"),
                     "tls_key": str(tmp_path / "me.key"),
                     "tls_ca": str(tmp_path / "certs" / "ca.pem"), "token": "t"}
    opts = ReadOptions.parse({"config": "c", "logs": "1", "tlsCa": "/etc/ca.pem"})
    assert opts.credentials == (("tls_ca", "/etc/ca.pem"),)
