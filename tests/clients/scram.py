"""SASL/SCRAM with confluent-kafka (driven by tests/scram.rs) against a quorum whose client
listeners are SASL_PLAINTEXT with SCRAM-SHA-256 and SCRAM-SHA-512 enabled. The Rust test has
created the user `admin` (SCRAM-SHA-512, password `admin-secret`) over a controller listener,
which is PLAINTEXT: the first user cannot be created over a listener that needs one.

Phase `admin` (argv[2]):
- DescribeUserScramCredentials of an unknown user: RESOURCE_NOT_FOUND for that user.
- AlterUserScramCredentials upserts alice (SCRAM-SHA-256, 8192 iterations) and bob
  (SCRAM-SHA-512, 4096); the errors Kafka's controller answers: a user twice in one request
  DUPLICATE_RESOURCE, 100 or 20000 iterations UNACCEPTABLE_CREDENTIAL, deleting a credential that
  does not exist RESOURCE_NOT_FOUND (an unknown mechanism librdkafka refuses itself:
  tests/scram.rs sends one).
- Describe names each user's mechanisms and iterations; Describe of all users lists exactly the
  users with credentials.
- alice (SCRAM-SHA-256) and bob (SCRAM-SHA-512) produce and consume; a wrong password and an
  unknown user fail authentication.

Phase `after-restart` (every node was restarted):
- the credentials are all still there; alice reads what she produced before and produces more;
- alice's credential deleted: Describe answers RESOURCE_NOT_FOUND and her login fails.
"""
import time

from common import eventually, log, main
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialDeletion, UserScramCredentialUpsertion)

TOPIC = "scram-topic"
SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512


def sasl(user, password, mechanism):
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}


def admin_client(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap,
                        **sasl("admin", "admin-secret", "SCRAM-SHA-512")})


def alter(admin, alterations):
    """Each user's outcome: None or the error's name."""
    futures = admin.alter_user_scram_credentials(alterations, request_timeout=30)
    outcome = {}
    for user, future in futures.items():
        try:
            future.result()
            outcome[user] = None
        except KafkaException as error:
            outcome[user] = error.args[0].name()
    return outcome


def describe(admin, users):
    """{user: sorted [(mechanism, iterations)] or the error's name}."""
    futures = admin.describe_user_scram_credentials(users, request_timeout=30)
    outcome = {}
    for user, future in futures.items():
        try:
            description = future.result()
            outcome[user] = sorted((info.mechanism, info.iterations)
                                   for info in description.scram_credential_infos)
        except KafkaException as error:
            outcome[user] = error.args[0].name()
    return outcome


def describe_all(admin):
    described = admin.describe_user_scram_credentials(request_timeout=30).result()
    return {user: sorted((info.mechanism, info.iterations) for info in d.scram_credential_infos)
            for user, d in described.items()}


def produce(bootstrap, credentials, values):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 30000,
                  **credentials})
    errors = []
    for value in values:
        p.produce(TOPIC, value=value, partition=0,
                  on_delivery=lambda error, _msg: errors.append(error) if error else None)
    remaining = p.flush(60)
    assert remaining == 0 and not errors, f"produce failed: {remaining} left, {errors}"


def consume(bootstrap, credentials, count):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "scram-reader",
                  "enable.auto.commit": False, **credentials})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    c.close()
    return got


def authentication_fails(bootstrap, credentials):
    """True once the client reports an authentication error (it never gets a session)."""
    seen = []
    p = Producer({"bootstrap.servers": bootstrap, **credentials,
                  "error_cb": lambda error: seen.append(error)})
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not any(
            e.code() == KafkaError._AUTHENTICATION for e in seen):
        p.poll(0.2)
    try:
        metadata_ok = p.list_topics(timeout=2) is not None
    except KafkaException:
        metadata_ok = False
    failed = any(e.code() == KafkaError._AUTHENTICATION for e in seen) and not metadata_ok
    log(f"  errors seen: {[str(e) for e in seen][:2]}")
    return failed


def phase_admin(bootstrap):
    admin = admin_client(bootstrap)
    assert describe(admin, ["alice"]) == {"alice": "RESOURCE_NOT_FOUND"}, describe(admin, ["alice"])
    log("describe of an unknown user: RESOURCE_NOT_FOUND")

    created = alter(admin, [
        UserScramCredentialUpsertion("alice", ScramCredentialInfo(SHA256, 8192), b"alice-secret"),
        UserScramCredentialUpsertion("bob", ScramCredentialInfo(SHA512, 4096), b"bob-secret",
                                     b"bob-salt"),
    ])
    assert created == {"alice": None, "bob": None}, created
    log("alice (SCRAM-SHA-256) and bob (SCRAM-SHA-512) created")

    errors = {
        "twice": alter(admin, [
            UserScramCredentialUpsertion("carol", ScramCredentialInfo(SHA256, 4096), b"c"),
            UserScramCredentialUpsertion("carol", ScramCredentialInfo(SHA512, 4096), b"c")]),
        "few": alter(admin, [
            UserScramCredentialUpsertion("dave", ScramCredentialInfo(SHA256, 100), b"d")]),
        "many": alter(admin, [
            UserScramCredentialUpsertion("dave", ScramCredentialInfo(SHA256, 20000), b"d")]),
        "absent": alter(admin, [UserScramCredentialDeletion("dave", SHA256)]),
    }
    expected = {
        "twice": {"carol": "DUPLICATE_RESOURCE"},
        "few": {"dave": "UNACCEPTABLE_CREDENTIAL"},
        "many": {"dave": "UNACCEPTABLE_CREDENTIAL"},
        "absent": {"dave": "RESOURCE_NOT_FOUND"},
    }
    assert errors == expected, errors
    log(f"alteration errors as Kafka's: {errors}")

    described = describe(admin, ["alice", "bob", "carol"])
    assert described == {"alice": [(SHA256, 8192)], "bob": [(SHA512, 4096)],
                         "carol": "RESOURCE_NOT_FOUND"}, described
    everyone = describe_all(admin)
    assert everyone == {"admin": [(SHA512, 4096)], "alice": [(SHA256, 8192)],
                        "bob": [(SHA512, 4096)]}, everyone
    log(f"describe: {described}; all users: {sorted(everyone)}")

    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(timeout=30)
    eventually("the topic's leader", lambda: admin.list_topics(TOPIC, timeout=5)
               .topics[TOPIC].partitions[0].leader >= 0)
    alice = sasl("alice", "alice-secret", "SCRAM-SHA-256")
    bob = sasl("bob", "bob-secret", "SCRAM-SHA-512")
    produce(bootstrap, alice, [b"a1", b"a2"])
    produce(bootstrap, bob, [b"b1"])
    got = consume(bootstrap, bob, 3)
    assert got == [b"a1", b"a2", b"b1"], got
    got = consume(bootstrap, alice, 3)
    assert got == [b"a1", b"a2", b"b1"], got
    log("alice (SCRAM-SHA-256) and bob (SCRAM-SHA-512) produced and consumed")

    assert authentication_fails(bootstrap, sasl("alice", "wrong", "SCRAM-SHA-256"))
    assert authentication_fails(bootstrap, sasl("alice", "alice-secret", "SCRAM-SHA-512"))
    assert authentication_fails(bootstrap, sasl("mallory", "x", "SCRAM-SHA-256"))
    log("a wrong password, a mechanism without a credential and an unknown user fail")


def phase_after_restart(bootstrap):
    def ready():
        admin = admin_client(bootstrap)
        describe_all(admin)
        # A tuple: an AdminClient is falsy (its len() is its queue's).
        return (admin,)

    (admin,) = eventually("an admin session after the restart", ready, timeout_s=60)
    everyone = describe_all(admin)
    assert everyone == {"admin": [(SHA512, 4096)], "alice": [(SHA256, 8192)],
                        "bob": [(SHA512, 4096)]}, everyone
    log(f"after the restart of every node, all users: {everyone}")
    alice = sasl("alice", "alice-secret", "SCRAM-SHA-256")
    produce(bootstrap, alice, [b"a3"])
    got = consume(bootstrap, alice, 4)
    assert got == [b"a1", b"a2", b"b1", b"a3"], got
    log("alice reads and produces after the restart")

    deleted = alter(admin, [UserScramCredentialDeletion("alice", SHA256)])
    assert deleted == {"alice": None}, deleted
    assert describe(admin, ["alice"]) == {"alice": "RESOURCE_NOT_FOUND"}
    assert authentication_fails(bootstrap, alice)
    log("alice's credential deleted: described as RESOURCE_NOT_FOUND, her login fails")


def body(args):
    bootstrap, phase = args[0], args[1]
    {"admin": phase_admin, "after-restart": phase_after_restart}[phase](bootstrap)


if __name__ == "__main__":
    main(body)
