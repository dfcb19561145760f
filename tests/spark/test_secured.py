"""The data source against a secured cluster (TLS, principals, ACLs): a principal's
credentials as options (``tls_cert``/``tls_key``, ``token``/``token_file``, ``tls_ca``)
reach every task; a query without them, or with a principal that lacks the right, fails.
With ``config_json`` and ``tls_ca`` the tasks need no config file and not the CA file the
config names."""

from __future__ import annotations

import json

import pytest
from pyspark.errors import PySparkException

import logdevice.spark
from logdevice.errors import InvalidParamError
from logdevice.spark.options import parse_credentials

pytestmark = pytest.mark.cluster

TOKEN = "spark-reader-token-0123456789"


@pytest.fixture(scope="module")
def cluster(module_cluster):
    return module_cluster(nodes=3, replication=2, logs=range(1, 4), tls=True,
                          security={"principals": {"writer": {}, "reader": {"token": TOKEN}},
                                    "acl": {"append": ["writer"],
                                            "read": ["writer", "reader"]}})


def certificate(cluster, name: str) -> dict[str, str]:
    cert, key = cluster.client_cert(name)
    return {"tls_cert": str(cert), "tls_key": str(key)}


def test_write_and_read_as_principals(spark, cluster, tmp_path):
    config = str(cluster.config_path)
    df = spark.range(200).selectExpr("cast(concat('s-', id) as binary) as payload")
    (df.write.format("logdevice").option("config", config).option("log", "2")
     .options(**certificate(cluster, "writer")).mode("append").save())
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    rows = (spark.read.format("logdevice").option("config", config).option("logs", "2")
            .option("token_file", str(token_file)).load().collect())
    assert sorted(bytes(r.payload) for r in rows) == sorted(b"s-%d" % i for i in range(200))
    stream = (spark.readStream.format("logdevice").option("config", config)
              .option("logs", "2").options(**certificate(cluster, "writer")).load())
    query = (stream.writeStream.format("memory").queryName("secured_stream")
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(120)
    finally:
        query.stop()
    assert spark.sql("SELECT count(*) AS n FROM secured_stream").collect()[0].n == 200


def test_without_the_right_the_query_fails(spark, cluster):
    config = str(cluster.config_path)
    with pytest.raises(PySparkException, match="ACCESS|AccessError"):  # anonymous
        spark.read.format("logdevice").option("config", config).option("logs", "2") \
            .load().collect()
    df = spark.range(3).selectExpr("cast(cast(id as string) as binary) as payload")
    with pytest.raises(PySparkException, match="ACCESS|AccessError"):  # a reader appends
        (df.write.format("logdevice").option("config", config).option("log", "3")
         .option("token", TOKEN).mode("append").save())


def test_credential_options_are_checked_on_the_driver(tmp_path):
    assert parse_credentials({"token": " t "}) == (("token", "t"),)
    with pytest.raises(InvalidParamError, match="token or token_file"):
        parse_credentials({"token": "a", "token_file": str(tmp_path / "x")})
    with pytest.raises(InvalidParamError, match="cannot read"):
        parse_credentials({"token_file": str(tmp_path / "missing")})
    with pytest.raises(InvalidParamError, match="tls_key needs tls_cert"):
        parse_credentials({"tls_key": "k.pem"})


def config_json_without_its_ca(cluster) -> str:
    """The cluster's config as a document naming a CA file that no machine has: only
    option ``tls_ca`` makes it usable."""
    doc = cluster.config.to_dict()
    doc["security"]["tls"]["ca"] = "ca-that-is-nowhere.pem"
    return json.dumps(doc)


def test_config_json_tls_ca_and_credentials_reach_every_task(spark, cluster):
    secured = {"config_json": config_json_without_its_ca(cluster),
               "tlsCa": str(cluster.root / "tls" / "ca.pem")}
    df = spark.range(150).selectExpr("cast(concat('j-', id) as binary) as payload")
    (df.repartition(2).write.format("logdevice").options(**secured)
     .options(**certificate(cluster, "writer")).option("log", "1").mode("append").save())
    expected = sorted(b"j-%d" % i for i in range(150))
    rows = (spark.read.format("logdevice").options(**secured).option("logs", "1")
            .option("token", TOKEN).option("recordsPerPartition", "40").load().collect())
    assert sorted(bytes(r.payload) for r in rows) == expected
    stream = (spark.readStream.format("logdevice").options(**secured).option("logs", "1")
              .option("token", TOKEN).option("maxRecordsPerTrigger", "60").load())
    query = (stream.writeStream.format("memory").queryName("secured_json_stream")
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(120)
    finally:
        query.stop()
    got = spark.sql("SELECT payload FROM secured_json_stream").collect()
    assert sorted(bytes(r.payload) for r in got) == expected
    with cluster.client(token=TOKEN) as client:
        tail = client.get_tail_lsn(1)
    ranges = spark.createDataFrame([(1, 0, tail)], "log_id long, from_lsn long, until_lsn long")
    out = logdevice.spark.read_ranges(ranges, config_json=secured["config_json"],
                                      tls_ca=secured["tlsCa"], token=TOKEN)
    assert sorted(bytes(r.payload) for r in out.collect()) == expected


def test_without_the_ca_or_a_principal_the_query_fails_clearly(spark, cluster):
    doc = config_json_without_its_ca(cluster)
    with pytest.raises(PySparkException, match=r"security.tls.ca: cannot load .*"
                                                r"ca-that-is-nowhere.pem"):
        (spark.read.format("logdevice").option("config_json", doc).option("logs", "1")
         .option("token", TOKEN).load().collect())
    ca = str(cluster.root / "tls" / "ca.pem")
    with pytest.raises(PySparkException, match=r"ACCESS.*anonymous"):
        (spark.read.format("logdevice").option("config_json", doc).option("tls_ca", ca)
         .option("logs", "1").load().collect())
    df = spark.range(3).selectExpr("cast(cast(id as string) as binary) as payload")
    with pytest.raises(PySparkException, match=r"ACCESS.*reader.*append"):
        (df.write.format("logdevice").option("config_json", doc).option("tls_ca", ca)
         .option("token", TOKEN).option("log", "1").mode("append").save())
