"""The data source against a secured cluster (TLS, principals, ACLs): a principal's
credentials as options (``tls_cert``/``tls_key``, ``token``/``token_file``) reach every
task; a query without them, or with a principal that lacks the right, fails."""

from __future__ import annotations

import pytest
from pyspark.errors import PySparkException

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
