"""The transaction coordinator's broker configs (`transaction.max.timeout.ms`,
`transactional.id.expiration.ms`, `transaction.partition.verification.enable`): set
through the environment like any other setting, shown by DescribeConfigs on the broker
(confluent-kafka's AdminClient), and applied: a producer asking for a longer
transaction timeout is refused (INVALID_TRANSACTION_TIMEOUT), and an idle transactional
id is forgotten once it expires (DescribeTransactions answers TRANSACTIONAL_ID_NOT_FOUND)."""

import time
import uuid

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource
from kafka.admin import KafkaAdminClient
from kafka.errors import TransactionalIdNotFoundError

BROKER = ConfigResource.Type.BROKER


def broker_configs(bootstrap):
    a = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(BROKER, "1")
    return a.describe_configs([res])[res].result(10)


def test_defaults_are_kafkas(nagare):
    c = broker_configs(nagare.kafka)
    assert c["transaction.max.timeout.ms"].value == "900000"
    assert c["transactional.id.expiration.ms"].value == "604800000"
    assert c["transaction.partition.verification.enable"].value == "true"


def test_settings_from_the_environment_apply(nagare_factory):
    n = nagare_factory(env={
        "NAGARE_KAFKA_TRANSACTION_MAX_TIMEOUT_MS": "20000",
        "NAGARE_KAFKA_TRANSACTIONAL_ID_EXPIRATION_MS": "1500",
        "NAGARE_KAFKA_TRANSACTION_PARTITION_VERIFICATION_ENABLE": "false",
    })
    c = broker_configs(n.kafka)
    assert c["transaction.max.timeout.ms"].value == "20000"
    assert c["transactional.id.expiration.ms"].value == "1500"
    assert c["transaction.partition.verification.enable"].value == "false"

    # A timeout above the maximum: InitProducerId fails.
    too_long = Producer({"bootstrap.servers": n.kafka, "transactional.id": "tx-long",
                         "transaction.timeout.ms": 30000})
    try:
        too_long.init_transactions(10)
        raise AssertionError("init_transactions accepted a timeout above the maximum")
    except KafkaException as e:
        assert "INVALID_TRANSACTION_TIMEOUT" in str(e) or "timeout" in str(e).lower(), str(e)

    # Within it: fine; then the idle id expires.
    txn_id = f"tx-{uuid.uuid4().hex[:8]}"
    ok = Producer({"bootstrap.servers": n.kafka, "transactional.id": txn_id,
                   "transaction.timeout.ms": 10000})
    ok.init_transactions(10)
    admin = KafkaAdminClient(bootstrap_servers=n.kafka)
    try:
        assert known(admin, txn_id)
        deadline = time.time() + 30
        while known(admin, txn_id) and time.time() < deadline:
            time.sleep(0.5)
        assert not known(admin, txn_id)
    finally:
        admin.close()


def known(admin, txn_id):
    """Whether the coordinator still has `txn_id` (DescribeTransactions)."""
    try:
        admin.describe_transactions([txn_id])
        return True
    except TransactionalIdNotFoundError:
        return False
