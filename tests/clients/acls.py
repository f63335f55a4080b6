"""ACLs and the authorizer with confluent-kafka's AdminClient and Producer (driven by
tests/acls.rs). Argument 2 is the mode:

- `authorizer`: the quorum runs StandardAuthorizer with allow.everyone.if.no.acl.found=true.
  create_acls / describe_acls (LITERAL, PREFIXED, MATCH, ANY filters) / delete_acls round trip;
  a DENY WRITE for User:ANONYMOUS on topic A fails produce to A with TOPIC_AUTHORIZATION_FAILED
  while B works; prints `RESTART` (every node restarted) and checks the ACLs are still there;
  prints `STRICT` (restarted with allow.everyone.if.no.acl.found=false): A, without ACLs, is
  refused, B with an ALLOW ALL binding works, the authorized operations are the granted ones;
  with DESCRIBE only on A, CreatePartitions, DeleteRecords, DescribeConfigs and Fetch on A are
  refused, and JoinGroup on a group without ACLs;
  prints `SUPER` (restarted with super.users=User:ANONYMOUS): A works.
- `tls:<folder>`: the client listener speaks SSL and requires a client certificate: the
  certificate's subject DN is the principal (alice refused until an ACL names
  `User:CN=alice,O=ringlog`; admin a super user).
- `disabled`: no authorizer: the ACL APIs answer SECURITY_DISABLED, and the authorized
  operations of the cluster, a topic and a group are all of their type's.

Each `WORD` line waits for a line on stdin (the Rust side's answer).
"""
import sys
import time

from common import eventually, log, main
from confluent_kafka import (Consumer, KafkaError, KafkaException, Producer, TopicCollection,
                             TopicPartition)
from kafka.admin import (ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                         KafkaAdminClient, ResourcePatternFilter)
from kafka.admin import ResourceType as KResourceType
from kafka.errors import SecurityDisabledError
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   AdminClient, ConfigResource, NewPartitions, NewTopic,
                                   ResourcePatternType, ResourceType)

A, B = "acl-a", "acl-b"

ALL_TOPIC_OPS = {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                 AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.ALTER,
                 AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
ALL_CLUSTER_OPS = {AclOperation.CREATE, AclOperation.CLUSTER_ACTION,
                   AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                   AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER, AclOperation.DESCRIBE}
# Kafka 3.9's (4.0 adds DESCRIBE_CONFIGS and ALTER_CONFIGS with group configs).
ALL_GROUP_OPS = {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}


def ask(word):
    log(word)
    assert sys.stdin.readline().strip(), f"no answer to {word}"


def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def produce_one(bootstrap, topic):
    """Produces one record; returns the delivery error's name, or None."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 15000,
                  "retries": 0})
    outcome = []
    p.produce(topic, value=b"v", on_delivery=lambda error, _m: outcome.append(
        error.name() if error else None))
    p.flush(30)
    assert outcome, f"no delivery report for {topic}"
    return outcome[0]


def error_code(future):
    """The error code an admin future fails with (None: it succeeded)."""
    try:
        future.result(timeout=15)
    except KafkaException as error:
        return error.args[0].code()
    return None


def first_consumer_error(bootstrap, assign=None, group="acl-reader", subscribe=None):
    """The code of the first error a consumer of `assign` (no group) or of `subscribe` (in
    `group`) reports within 30 s, or None."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        if assign is not None:
            c.assign([assign])
        else:
            c.subscribe([subscribe])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is not None:
                return msg.error().code()
        return None
    finally:
        c.close()


def create_topics(a, names):
    for name, future in a.create_topics([NewTopic(n, 1) for n in names]).items():
        future.result(timeout=30)


def acl(name, pattern, principal, operation, permission,
        resource_type=ResourceType.TOPIC):
    return AclBinding(resource_type, name, pattern, principal, "*", operation, permission)


def bindings(a, resource_type=ResourceType.ANY, name=None,
             pattern=ResourcePatternType.ANY, principal=None):
    found = a.describe_acls(AclBindingFilter(resource_type, name, pattern, principal, None,
                                             AclOperation.ANY, AclPermissionType.ANY))
    return sorted(found.result(timeout=15), key=str)


PREFIXED_READ = acl("acl-pre", ResourcePatternType.PREFIXED, "User:test1", AclOperation.READ,
                    AclPermissionType.ALLOW)
LITERAL_WRITE = acl("acl-lit", ResourcePatternType.LITERAL, "User:test2", AclOperation.WRITE,
                    AclPermissionType.ALLOW)
DENY_A = acl(A, ResourcePatternType.LITERAL, "User:ANONYMOUS", AclOperation.WRITE,
             AclPermissionType.DENY)


def authorizer(bootstrap):
    a = admin(bootstrap)
    create_topics(a, [A, B])
    eventually("both topics take records", lambda: produce_one(bootstrap, A) is None
               and produce_one(bootstrap, B) is None, timeout_s=60)

    # CreateAcls: every result ok, the same binding twice is one binding.
    for binding, future in a.create_acls([PREFIXED_READ, LITERAL_WRITE, DENY_A]).items():
        assert future.result(timeout=15) is None, f"{binding} not created"
    for future in a.create_acls([LITERAL_WRITE]).values():
        future.result(timeout=15)
    expected = sorted([PREFIXED_READ, LITERAL_WRITE, DENY_A], key=str)
    eventually("the three bindings", lambda: bindings(a) == expected)
    log("created and described")

    # DescribeAcls filters, as librdkafka's 0081 asks them.
    assert bindings(a, ResourceType.TOPIC, "acl-lit", ResourcePatternType.LITERAL) == \
        [LITERAL_WRITE]
    assert bindings(a, ResourceType.TOPIC, None, ResourcePatternType.PREFIXED) == [PREFIXED_READ]
    assert bindings(a, ResourceType.TOPIC, "acl-pre", ResourcePatternType.LITERAL) == []
    # MATCH: every binding that applies to the topic "acl-pre-1".
    assert bindings(a, ResourceType.TOPIC, "acl-pre-1", ResourcePatternType.MATCH) == \
        [PREFIXED_READ]
    assert bindings(a, ResourceType.GROUP) == []
    assert bindings(a, principal="User:test2") == [LITERAL_WRITE]

    # Enforcement: DENY WRITE on A for User:ANONYMOUS; B has no ACL and everyone is allowed.
    eventually("produce to A refused", lambda: produce_one(bootstrap, A) ==
               "TOPIC_AUTHORIZATION_FAILED")
    assert produce_one(bootstrap, B) is None, "produce to B"
    log("deny enforced")

    ask("RESTART")
    a = admin(bootstrap)
    eventually("the bindings after every node restarted", lambda: bindings(a) == expected,
               timeout_s=60)
    assert produce_one(bootstrap, A) == "TOPIC_AUTHORIZATION_FAILED", "A after restart"
    log("bindings survived the restart")

    # DeleteAcls returns the matching bindings per filter.
    deny_filter = AclBindingFilter(ResourceType.TOPIC, A, ResourcePatternType.LITERAL, None, None,
                                   AclOperation.ANY, AclPermissionType.DENY)
    nothing = AclBindingFilter(ResourceType.GROUP, None, ResourcePatternType.ANY, None, None,
                               AclOperation.ANY, AclPermissionType.ANY)
    deleted = a.delete_acls([deny_filter, nothing])
    assert deleted[deny_filter].result(timeout=15) == [DENY_A], deleted[deny_filter].result()
    assert deleted[nothing].result(timeout=15) == [], deleted[nothing].result()
    eventually("produce to A allowed again", lambda: produce_one(bootstrap, A) is None)
    eventually("two bindings left", lambda: bindings(a) == sorted([PREFIXED_READ, LITERAL_WRITE],
                                                                   key=str))
    log("deleted")

    # Before allow.everyone.if.no.acl.found goes false: ANONYMOUS may do anything to B and
    # describe and alter the cluster.
    grants = [
        acl(B, ResourcePatternType.LITERAL, "User:ANONYMOUS", AclOperation.ALL,
            AclPermissionType.ALLOW),
        acl("kafka-cluster", ResourcePatternType.LITERAL, "User:*", AclOperation.ALTER,
            AclPermissionType.ALLOW, ResourceType.BROKER),
        acl("kafka-cluster", ResourcePatternType.LITERAL, "User:*", AclOperation.DESCRIBE,
            AclPermissionType.ALLOW, ResourceType.BROKER),
    ]
    for binding, future in a.create_acls(grants).items():
        assert future.result(timeout=15) is None, f"{binding} not created"
    eventually("five bindings", lambda: len(bindings(a)) == 5)

    ask("STRICT")
    a = admin(bootstrap)
    eventually("produce to B with its ALLOW ALL", lambda: produce_one(bootstrap, B) is None,
               timeout_s=60)
    assert produce_one(bootstrap, A) == "TOPIC_AUTHORIZATION_FAILED", "A without any ACL"
    cluster = a.describe_cluster(include_authorized_operations=True).result(timeout=15)
    assert set(cluster.authorized_operations) == {AclOperation.ALTER, AclOperation.DESCRIBE}, \
        cluster.authorized_operations
    topics = a.describe_topics(TopicCollection([B]), include_authorized_operations=True)
    described = topics[B].result(timeout=15)
    assert set(described.authorized_operations) == ALL_TOPIC_OPS, described.authorized_operations
    # ALTER on the cluster lets ANONYMOUS manage ACLs still.
    assert bindings(a, ResourceType.TOPIC, B) != []
    # With DESCRIBE on A only (so clients find its leader), the admin APIs that need more are
    # refused per topic: CreatePartitions ALTER, DeleteRecords DELETE, DescribeConfigs
    # DESCRIBE_CONFIGS (DESCRIBE implies none of them).
    describe_a = acl(A, ResourcePatternType.LITERAL, "User:ANONYMOUS", AclOperation.DESCRIBE,
                     AclPermissionType.ALLOW)
    for future in a.create_acls([describe_a]).values():
        future.result(timeout=15)
    refused = KafkaError.TOPIC_AUTHORIZATION_FAILED
    records = TopicPartition(A, 0, 0)

    # Each attempt uses a new client: librdkafka caches a Metadata answer of
    # TOPIC_AUTHORIZATION_FAILED for metadata.max.age.ms, and the node it asks may apply the
    # DESCRIBE binding a moment after CreateAcls was answered. A client that cached A's
    # refusal finds no leader for it and fails DeleteRecords with _NOENT, attempt after
    # attempt (a flake of 2026-12-04's CI).
    def delete_records_refused():
        fresh = admin(bootstrap)  # held until the future is done
        return error_code(fresh.delete_records([records])[records]) == refused
    eventually("DeleteRecords on A refused", delete_records_refused)
    assert error_code(a.create_partitions([NewPartitions(A, 2)])[A]) == refused, "partitions"
    resource = ConfigResource(ResourceType.TOPIC, A)
    assert error_code(a.describe_configs([resource])[resource]) == refused, "DescribeConfigs"
    assert produce_one(bootstrap, A) == "TOPIC_AUTHORIZATION_FAILED", "A with DESCRIBE only"
    # A consumer: reading A needs READ (Fetch refused), joining a group READ on the group.
    assert first_consumer_error(bootstrap, assign=TopicPartition(A, 0, 0)) == refused, "Fetch"
    assert first_consumer_error(bootstrap, group="acl-strict", subscribe=B) == \
        KafkaError.GROUP_AUTHORIZATION_FAILED, "JoinGroup"
    log("strict enforced")

    ask("SUPER")
    eventually("produce to A as a super user", lambda: produce_one(bootstrap, A) is None,
               timeout_s=60)
    log("super user allowed")


def disabled(bootstrap):
    a = admin(bootstrap)
    create_topics(a, [A])
    binding = acl(A, ResourcePatternType.LITERAL, "User:x", AclOperation.READ,
                  AclPermissionType.ALLOW)

    def security_disabled(future):
        try:
            future.result(timeout=15)
        except KafkaException as error:
            return error.args[0].code() == KafkaError.SECURITY_DISABLED
        return False

    assert security_disabled(list(a.create_acls([binding]).values())[0]), "CreateAcls"
    any_filter = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    # librdkafka drops DescribeAcls' top-level error (its result is then empty): kafka-python
    # raises it.
    kafka_admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        kafka_admin.describe_acls(ACLFilter(
            principal=None, host="*", operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(
                KResourceType.ANY, None, ACLResourcePatternType.ANY)))
        raise AssertionError("DescribeAcls answered without an error")
    except SecurityDisabledError:
        pass
    finally:
        kafka_admin.close()
    assert security_disabled(list(a.delete_acls([any_filter]).values())[0]), "DeleteAcls"
    log("SECURITY_DISABLED")

    cluster = a.describe_cluster(include_authorized_operations=True).result(timeout=15)
    assert set(cluster.authorized_operations) == ALL_CLUSTER_OPS, cluster.authorized_operations
    # Not asked for: none reported.
    plain = a.describe_cluster().result(timeout=15)
    assert not plain.authorized_operations, plain.authorized_operations
    described = a.describe_topics(TopicCollection([A]), include_authorized_operations=True)
    ops = described[A].result(timeout=15).authorized_operations
    assert set(ops) == ALL_TOPIC_OPS, ops

    # A group that exists (one committed offset).
    eventually("A takes a record", lambda: produce_one(bootstrap, A) is None, timeout_s=60)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "acl-group",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([A])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is not None and msg.error() is None:
            c.commit(msg, asynchronous=False)
            break
    groups = a.describe_consumer_groups(["acl-group"], include_authorized_operations=True)
    group = groups["acl-group"].result(timeout=15)
    c.close()
    assert set(group.authorized_operations) == ALL_GROUP_OPS, group.authorized_operations
    log("authorized operations all")


def tls(bootstrap, folder):
    """The quorum's client listener speaks SSL and requires a client certificate; `folder`
    holds ca.pem and admin/alice .pem/.key (tests/acls.rs). admin is a super user."""
    def as_user(user):
        return {"bootstrap.servers": bootstrap, "security.protocol": "SSL",
                "ssl.ca.location": f"{folder}/ca.pem",
                "ssl.certificate.location": f"{folder}/{user}.pem",
                "ssl.key.location": f"{folder}/{user}.key"}

    admin_client = AdminClient(as_user("admin"))

    def create():
        code = error_code(admin_client.create_topics([NewTopic(A, 1)])[A])
        return code in (None, KafkaError.TOPIC_ALREADY_EXISTS)

    eventually("the topic created by the super user", create)

    def produce_as(user):
        p = Producer({**as_user(user), "acks": "all", "message.timeout.ms": 15000,
                      "retries": 0})
        outcome = []
        p.produce(A, value=user.encode(), on_delivery=lambda error, _m: outcome.append(
            error.name() if error else None))
        p.flush(30)
        return outcome[0] if outcome else "no report"

    eventually("the super user produces", lambda: produce_as("admin") is None, timeout_s=60)
    assert produce_as("alice") == "TOPIC_AUTHORIZATION_FAILED", "alice before her ACL"
    alice = "User:CN=alice,O=ringlog"
    write = acl(A, ResourcePatternType.LITERAL, alice, AclOperation.WRITE,
                AclPermissionType.ALLOW)
    for future in admin_client.create_acls([write]).values():
        future.result(timeout=15)
    assert bindings(admin_client, principal=alice) == [write]
    # WRITE implies DESCRIBE, so her producer finds the topic's leader too.
    eventually("alice produces with her ACL", lambda: produce_as("alice") is None)
    # Her certificate gives her no right on the ACLs themselves.
    alice_admin = AdminClient(as_user("alice"))
    code = error_code(alice_admin.create_acls([write])[write])
    assert code == KafkaError.CLUSTER_AUTHORIZATION_FAILED, f"alice's CreateAcls: {code}"
    log("principal from the certificate")


def run(args):
    bootstrap, mode = args
    if mode.startswith("tls:"):
        tls(bootstrap, mode[len("tls:"):])
        return
    {"authorizer": authorizer, "disabled": disabled}[mode](bootstrap)


if __name__ == "__main__":
    main(run)
