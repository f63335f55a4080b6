"""Topic administration with unmodified clients (driven by tests/topics_admin.rs).

kafka-python's KafkaAdminClient and confluent-kafka's AdminClient create topics with configs,
have bad configs refused by name (INVALID_CONFIG), delete the topics (DeleteTopics), get
UNKNOWN_TOPIC_OR_PARTITION for a missing one, and, after the Rust side restarted every node,
create a topic of the same name again: it gets a new topic id and none of the old records.

Protocol with the Rust test: the script prints `CREATED` (the Rust side checks every node's
folders) and `DELETED` (the Rust side checks every node's Metadata and folders, restarts all
nodes, checks again), and waits for a line on stdin after each.
"""
import sys
import time

from common import confluent_consume, confluent_produce, eventually, log, main
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic as CNewTopic
from kafka.admin import KafkaAdminClient

INVALID_CONFIG = 40
UNKNOWN_TOPIC_OR_PARTITION = 3
TOPIC_ALREADY_EXISTS = 36


def kp_admin(bootstrap):
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)


def kp_create(bootstrap, name, configs):
    """kafka-python creates `name` (1 partition); returns its CreateTopics result."""

    def attempt():
        admin = kp_admin(bootstrap)
        try:
            spec = {name: {"num_partitions": 1, "replication_factor": 3, "configs": configs}}
            result = admin.create_topics(spec, raise_errors=False)["topics"][0]
            # A retry after a lost answer finds its own topic.
            assert result["error_code"] in (0, TOPIC_ALREADY_EXISTS), f"CreateTopics: {result}"
            return result
        finally:
            admin.close()

    return eventually(f"kafka-python to create {name}", attempt)


def kp_refused(bootstrap, name, configs):
    """kafka-python's CreateTopics with a bad config: the error code and message."""
    admin = kp_admin(bootstrap)
    try:
        spec = {name: {"num_partitions": 1, "replication_factor": 3, "configs": configs}}
        result = admin.create_topics(spec, raise_errors=False)["topics"][0]
        return result["error_code"], result.get("error_message") or ""
    finally:
        admin.close()


def topic_id(bootstrap, name):
    """The topic's id from Metadata (once the node asked has applied its record)."""

    def attempt():
        admin = kp_admin(bootstrap)
        try:
            topics = admin.describe_topics([name])
            assert topics and topics[0]["error_code"] == 0, f"describe {name}: {topics}"
            return str(topics[0]["topic_id"])
        finally:
            admin.close()

    return eventually(f"Metadata to list {name}", attempt)


def confluent_admin_op(bootstrap, what, call, ok_on_retry):
    """A confluent admin call, asked again while the controller moves (NOT_CONTROLLER: the
    metadata partition's leader changed under the request). On a retry, `ok_on_retry` (the
    error an earlier, committed attempt leaves behind) counts as done."""
    attempts = [0]

    def attempt():
        attempts[0] += 1
        # A fresh client each time: one that got NOT_CONTROLLER was seen asking the same node
        # again for 30 s (open issue, see docs/clients.md).
        client = AdminClient({"bootstrap.servers": bootstrap})
        try:
            call(client).result(timeout=30)
        except KafkaException as error:
            code = error.args[0].code()
            if code == ok_on_retry and attempts[0] > 1:
                return True
            if code == KafkaError.NOT_CONTROLLER:
                raise
            raise AssertionError(f"{what}: {error}") from None
        return True

    def probe():
        try:
            return attempt()
        except AssertionError:
            raise
        except KafkaException:
            return False

    # Assertion errors stop at once; NOT_CONTROLLER is probed again.
    deadline_s = 30
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if probe():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what}: NOT_CONTROLLER for {deadline_s} s")


def wait_for_stdin(word):
    log(word)
    line = sys.stdin.readline()
    assert line.strip(), f"no answer to {word}"


def body(args):
    bootstrap, prefix = args
    kp, ck = f"{prefix}-kp", f"{prefix}-ck"

    # kafka-python: configs accepted and answered back (CreateTopics v5+).
    result = kp_create(bootstrap, kp, {
        "cleanup.policy": "delete",
        "retention.bytes": "1048576",
        "retention.ms": "3600000",
        "segment.bytes": "65536",
    })
    configs = result.get("configs") or {}
    answered = {name: c["value"] for name, c in configs.items()}
    assert answered.get("retention.bytes") == "1048576", f"configs answered: {configs}"
    assert answered.get("retention.ms") == "3600000", f"configs answered: {configs}"
    log(f"kafka-python created {kp} with configs {answered}")

    # kafka-python: a config we do not support, and a bad value, refused by name.
    for bad in ({"unclean.leader.election.enable": "true"}, {"retention.ms": "soon"},
                {"compression.type": "brotli"}):
        code, message = kp_refused(bootstrap, f"{prefix}-bad", bad)
        (name,) = bad
        assert code == INVALID_CONFIG, f"{bad}: error {code} {message!r}"
        assert name in message, f"{bad}: message {message!r} does not name it"
        log(f"kafka-python: {bad} refused: {message}")

    # confluent-kafka: create with configs, and a refused config.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    confluent_admin_op(bootstrap, f"confluent create {ck}", lambda a: a.create_topics(
        [CNewTopic(ck, num_partitions=2, replication_factor=3,
                   config={"cleanup.policy": "delete", "retention.ms": "60000"})],
        operation_timeout=10)[ck], KafkaError.TOPIC_ALREADY_EXISTS)
    log(f"confluent created {ck}")
    futures = admin.create_topics(
        [CNewTopic(f"{prefix}-bad", num_partitions=1, replication_factor=3,
                   config={"min.insync.replicas": "2"})],
        operation_timeout=10)
    try:
        futures[f"{prefix}-bad"].result(timeout=30)
        raise AssertionError("min.insync.replicas was accepted")
    except KafkaException as error:
        e = error.args[0]
        assert e.code() == KafkaError.INVALID_CONFIG, f"confluent bad config: {e}"
        assert "min.insync.replicas" in e.str(), f"message does not name it: {e.str()!r}"
        log(f"confluent: min.insync.replicas refused: {e.str()}")

    # Records on disk, so there is something to delete.
    confluent_produce(bootstrap, kp, 0, [f"old-{i}".encode() for i in range(20)], True)
    old_id = topic_id(bootstrap, kp)
    wait_for_stdin("CREATED")

    # DeleteTopics: kafka-python for one, confluent for the other.
    def kp_delete(name):
        # A fresh client per try: one bootstrapped on the node that was just killed raises
        # a connection error.
        admin_kp = kp_admin(bootstrap)
        try:
            return [t["error_code"] for t in
                    admin_kp.delete_topics([name], raise_errors=False)["topics"]]
        finally:
            admin_kp.close()

    codes = eventually(f"kafka-python to delete {kp}", lambda: kp_delete(kp))
    assert codes == [0], f"kafka-python delete: {codes}"
    codes = eventually("kafka-python to delete a missing topic",
                       lambda: kp_delete(f"{prefix}-missing"))
    assert codes == [UNKNOWN_TOPIC_OR_PARTITION], f"kafka-python delete of a missing topic: {codes}"
    log(f"kafka-python deleted {kp}; a missing topic is UNKNOWN_TOPIC_OR_PARTITION")
    confluent_admin_op(bootstrap, f"confluent delete {ck}",
                       lambda a: a.delete_topics([ck], operation_timeout=10)[ck],
                       KafkaError.UNKNOWN_TOPIC_OR_PART)
    try:
        admin.delete_topics([f"{prefix}-missing"], operation_timeout=10)[f"{prefix}-missing"] \
            .result(timeout=30)
        raise AssertionError("deleting a missing topic succeeded")
    except KafkaException as error:
        e = error.args[0]
        assert e.code() == KafkaError.UNKNOWN_TOPIC_OR_PART, f"confluent missing topic: {e}"
    log(f"confluent deleted {ck}; a missing topic is UNKNOWN_TOPIC_OR_PART")
    wait_for_stdin("DELETED")

    # After every node restarted: the same name is a new topic, with none of the old records.
    kp_create(bootstrap, kp, {})
    new_id = topic_id(bootstrap, kp)
    assert new_id != old_id, f"recreated {kp} kept its id {old_id}"
    log(f"{kp} recreated: id {old_id} -> {new_id}")
    acked = confluent_produce(bootstrap, kp, 0, [f"new-{i}".encode() for i in range(5)], True)
    # A fresh partition starts at offset 0 with its first leader's epoch record (a control
    # batch clients skip), so the data starts at 1; never past the old topic's 20 records.
    offsets = [o for o, _ in acked]
    assert offsets == list(range(offsets[0], offsets[0] + 5)) and offsets[0] <= 2, \
        f"new topic offsets: {acked}"
    got = confluent_consume(bootstrap, kp, 0, 0, 5)
    assert [v for _, v, _ in got] == [f"new-{i}".encode() for i in range(5)], \
        f"the recreated topic reads {got}"
    log(f"the recreated {kp} holds only its own records")


if __name__ == "__main__":
    main(body)
