//! The authorizer's rules (StandardAuthorizer's) and the filters' (Kafka's AclBindingFilter),
//! as pure functions: no node, no socket.

use super::binding::{InvalidAcl, WILDCARD_RESOURCE};
use super::*;

fn binding(
    resource_type: ResourceType,
    name: &str,
    pattern_type: PatternType,
    principal: &str,
    host: &str,
    operation: AclOperation,
    permission_type: AclPermissionType,
) -> AclBinding {
    AclBinding {
        resource_type,
        resource_name: name.to_string(),
        pattern_type,
        principal: principal.to_string(),
        host: host.to_string(),
        operation,
        permission_type,
    }
}

fn allow_topic(name: &str, pattern: PatternType, principal: &str, op: AclOperation) -> AclBinding {
    binding(
        ResourceType::Topic,
        name,
        pattern,
        principal,
        "*",
        op,
        AclPermissionType::Allow,
    )
}

fn deny_topic(name: &str, pattern: PatternType, principal: &str, op: AclOperation) -> AclBinding {
    binding(
        ResourceType::Topic,
        name,
        pattern,
        principal,
        "*",
        op,
        AclPermissionType::Deny,
    )
}

fn on(allow_everyone: bool, super_users: &[&str]) -> AuthorizerConfig {
    AuthorizerConfig {
        settings: Some(AuthorizerSettings {
            allow_everyone_if_no_acl_found: allow_everyone,
            super_users: super_users.iter().map(|s| s.to_string()).collect(),
        }),
    }
}

const ALICE: Asker<'static> = Asker {
    principal: "User:alice",
    host: "127.0.0.1",
};

fn topic(op: AclOperation, name: &str) -> Action<'_> {
    Action {
        operation: op,
        resource_type: ResourceType::Topic,
        resource_name: name,
    }
}

fn decide(config: &AuthorizerConfig, acls: &[AclBinding], asker: Asker, action: Action) -> bool {
    authorize(config, acls, asker, action).allowed()
}

#[test]
fn without_an_authorizer_everything_is_allowed_and_every_operation_is_authorized() {
    let config = AuthorizerConfig::default();
    let deny_all = [deny_topic(
        "t",
        PatternType::Literal,
        "User:*",
        AclOperation::All,
    )];
    assert_eq!(
        authorize(&config, &deny_all, ALICE, topic(AclOperation::Write, "t")),
        Decision::NoAuthorizer
    );
    // Kafka: READ WRITE CREATE DESCRIBE DELETE ALTER DESCRIBE_CONFIGS ALTER_CONFIGS = bits
    // 3 4 5 8 6 7 10 11.
    let expected =
        (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 10) | (1 << 11);
    assert_eq!(
        authorized_operations(&config, &deny_all, ALICE, ResourceType::Topic, "t"),
        expected
    );
}

#[test]
fn no_acl_for_the_resource_follows_allow_everyone_if_no_acl_found() {
    let other = [allow_topic(
        "other",
        PatternType::Literal,
        "User:bob",
        AclOperation::Read,
    )];
    assert!(!decide(
        &on(false, &[]),
        &other,
        ALICE,
        topic(AclOperation::Read, "t")
    ));
    assert!(decide(
        &on(true, &[]),
        &other,
        ALICE,
        topic(AclOperation::Read, "t")
    ));
    // An ACL names the resource but not alice: denied even with allow.everyone.if.no.acl.found.
    let bobs = [allow_topic(
        "t",
        PatternType::Literal,
        "User:bob",
        AclOperation::Read,
    )];
    assert_eq!(
        authorize(&on(true, &[]), &bobs, ALICE, topic(AclOperation::Read, "t")),
        Decision::NoMatchingAcl
    );
}

#[test]
fn deny_wins_over_allow_and_super_users_bypass_both() {
    let acls = [
        allow_topic("t", PatternType::Literal, "User:alice", AclOperation::All),
        deny_topic("t", PatternType::Prefixed, "User:*", AclOperation::Write),
    ];
    let config = on(true, &["User:root"]);
    assert!(!decide(
        &config,
        &acls,
        ALICE,
        topic(AclOperation::Write, "t")
    ));
    assert!(decide(
        &config,
        &acls,
        ALICE,
        topic(AclOperation::Read, "t")
    ));
    let root = Asker {
        principal: "User:root",
        host: "10.0.0.1",
    };
    assert_eq!(
        authorize(&config, &acls, root, topic(AclOperation::Write, "t")),
        Decision::SuperUser
    );
}

#[test]
fn literal_prefixed_and_wildcard_resources() {
    let config = on(false, &[]);
    let acls = [
        allow_topic(
            "orders",
            PatternType::Literal,
            "User:alice",
            AclOperation::Read,
        ),
        allow_topic(
            "logs-",
            PatternType::Prefixed,
            "User:alice",
            AclOperation::Read,
        ),
        allow_topic(
            WILDCARD_RESOURCE,
            PatternType::Literal,
            "User:alice",
            AclOperation::Write,
        ),
    ];
    assert!(decide(
        &config,
        &acls,
        ALICE,
        topic(AclOperation::Read, "orders")
    ));
    // A literal name is not a prefix.
    assert!(!decide(
        &config,
        &acls,
        ALICE,
        topic(AclOperation::Read, "orders2")
    ));
    assert!(decide(
        &config,
        &acls,
        ALICE,
        topic(AclOperation::Read, "logs-app")
    ));
    assert!(!decide(
        &config,
        &acls,
        ALICE,
        topic(AclOperation::Read, "logs")
    ));
    // `*` literal: every topic.
    assert!(decide(
        &config,
        &acls,
        ALICE,
        topic(AclOperation::Write, "anything")
    ));
    // A group of the same name is another resource.
    let group_read = Action {
        operation: AclOperation::Read,
        resource_type: ResourceType::Group,
        resource_name: "orders",
    };
    assert!(!decide(&config, &acls, ALICE, group_read));
}

#[test]
fn principal_wildcard_and_hosts() {
    let config = on(false, &[]);
    let acls = [binding(
        ResourceType::Topic,
        "t",
        PatternType::Literal,
        "User:*",
        "127.0.0.1",
        AclOperation::Read,
        AclPermissionType::Allow,
    )];
    assert!(decide(
        &config,
        &acls,
        ALICE,
        topic(AclOperation::Read, "t")
    ));
    let elsewhere = Asker {
        principal: "User:alice",
        host: "127.0.0.2",
    };
    assert!(!decide(
        &config,
        &acls,
        elsewhere,
        topic(AclOperation::Read, "t")
    ));
}

#[test]
fn allow_implies_describe_but_deny_does_not() {
    let config = on(false, &[]);
    for implying in [
        AclOperation::Read,
        AclOperation::Write,
        AclOperation::Delete,
        AclOperation::Alter,
    ] {
        let acls = [allow_topic(
            "t",
            PatternType::Literal,
            "User:alice",
            implying,
        )];
        assert!(
            decide(&config, &acls, ALICE, topic(AclOperation::Describe, "t")),
            "{implying:?}"
        );
    }
    let acls = [allow_topic(
        "t",
        PatternType::Literal,
        "User:alice",
        AclOperation::Create,
    )];
    assert!(!decide(
        &config,
        &acls,
        ALICE,
        topic(AclOperation::Describe, "t")
    ));
    let acls = [allow_topic(
        "t",
        PatternType::Literal,
        "User:alice",
        AclOperation::AlterConfigs,
    )];
    assert!(decide(
        &config,
        &acls,
        ALICE,
        topic(AclOperation::DescribeConfigs, "t")
    ));
    // A DENY READ does not deny DESCRIBE; with allow.everyone the ACL-named resource still has
    // an ACL, so nothing allows DESCRIBE either.
    let acls = [
        deny_topic("t", PatternType::Literal, "User:alice", AclOperation::Read),
        allow_topic(
            "t",
            PatternType::Literal,
            "User:alice",
            AclOperation::Describe,
        ),
    ];
    assert!(decide(
        &config,
        &acls,
        ALICE,
        topic(AclOperation::Describe, "t")
    ));
    assert!(!decide(
        &config,
        &acls,
        ALICE,
        topic(AclOperation::Read, "t")
    ));
    // ALL implies every operation, for ALLOW and DENY.
    let acls = [allow_topic(
        "t",
        PatternType::Literal,
        "User:alice",
        AclOperation::All,
    )];
    let bits = authorized_operations(&config, &acls, ALICE, ResourceType::Topic, "t");
    assert_eq!(
        bits,
        authorized_operations(
            &AuthorizerConfig::default(),
            &acls,
            ALICE,
            ResourceType::Topic,
            "t"
        )
    );
}

#[test]
fn authorized_operations_lists_exactly_what_is_allowed() {
    let config = on(false, &[]);
    let acls = [allow_topic(
        "t",
        PatternType::Literal,
        "User:alice",
        AclOperation::Read,
    )];
    // READ, and DESCRIBE through it.
    assert_eq!(
        authorized_operations(&config, &acls, ALICE, ResourceType::Topic, "t"),
        (1 << 3) | (1 << 8)
    );
    let cluster_bits = authorized_operations(
        &AuthorizerConfig::default(),
        &acls,
        ALICE,
        ResourceType::Cluster,
        "kafka-cluster",
    );
    // CREATE CLUSTER_ACTION DESCRIBE_CONFIGS ALTER_CONFIGS IDEMPOTENT_WRITE ALTER DESCRIBE.
    assert_eq!(
        cluster_bits,
        (1 << 5) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12) | (1 << 7) | (1 << 8)
    );
}

#[test]
fn create_acls_refuses_what_kafka_refuses() {
    let good = allow_topic("t", PatternType::Literal, "User:alice", AclOperation::Read);
    assert_eq!(good.validate_new(), Ok(()));
    let with = |f: &dyn Fn(&mut AclBinding)| {
        let mut b = good.clone();
        f(&mut b);
        b.validate_new()
    };
    assert_eq!(
        with(&|b| b.resource_type = ResourceType::Any),
        Err(InvalidAcl::ResourceType("ANY"))
    );
    assert_eq!(
        with(&|b| b.pattern_type = PatternType::Match),
        Err(InvalidAcl::PatternType("MATCH"))
    );
    assert_eq!(
        with(&|b| b.pattern_type = PatternType::from_code(42)),
        Err(InvalidAcl::PatternType("UNKNOWN"))
    );
    assert_eq!(
        with(&|b| b.operation = AclOperation::Any),
        Err(InvalidAcl::Operation("ANY"))
    );
    assert_eq!(
        with(&|b| b.permission_type = AclPermissionType::Any),
        Err(InvalidAcl::PermissionType("ANY"))
    );
    assert_eq!(
        with(&|b| b.resource_name.clear()),
        Err(InvalidAcl::EmptyResourceName)
    );
    assert!(matches!(
        with(&|b| b.principal = "alice".into()),
        Err(InvalidAcl::Principal(_))
    ));
}

#[test]
fn filters_match_as_kafka_s_any_and_match_do() {
    let literal = allow_topic(
        "orders",
        PatternType::Literal,
        "User:alice",
        AclOperation::Read,
    );
    let wildcard = allow_topic("*", PatternType::Literal, "User:bob", AclOperation::Write);
    let prefixed = deny_topic(
        "ord",
        PatternType::Prefixed,
        "User:bob",
        AclOperation::Write,
    );
    let all = [literal.clone(), wildcard.clone(), prefixed.clone()];
    let filter = |name: Option<&str>, pattern: PatternType| AclBindingFilter {
        resource_type: ResourceType::Topic,
        resource_name: name.map(str::to_string),
        pattern_type: pattern,
        principal: None,
        host: None,
        operation: AclOperation::Any,
        permission_type: AclPermissionType::Any,
    };
    let matched = |f: &AclBindingFilter| -> Vec<AclBinding> {
        all.iter().filter(|b| f.matches(b)).cloned().collect()
    };
    // MATCH: every binding that applies to the resource "orders".
    assert_eq!(
        matched(&filter(Some("orders"), PatternType::Match)),
        all.to_vec()
    );
    // ANY: the bindings of exactly that name, whatever their pattern type.
    assert_eq!(
        matched(&filter(Some("orders"), PatternType::Any)),
        vec![literal.clone()]
    );
    assert_eq!(
        matched(&filter(Some("ord"), PatternType::Any)),
        vec![prefixed.clone()]
    );
    // LITERAL / PREFIXED: that pattern type and exactly that name.
    assert_eq!(
        matched(&filter(Some("orders"), PatternType::Literal)),
        vec![literal.clone()]
    );
    assert_eq!(
        matched(&filter(None, PatternType::Prefixed)),
        vec![prefixed.clone()]
    );
    assert!(matched(&filter(Some("orders"), PatternType::Prefixed)).is_empty());
    // Entry fields.
    let mut by_principal = filter(None, PatternType::Any);
    by_principal.principal = Some("User:bob".into());
    by_principal.operation = AclOperation::Write;
    by_principal.permission_type = AclPermissionType::Deny;
    assert_eq!(matched(&by_principal), vec![prefixed]);
    // UNKNOWN fields are refused.
    let unknown = filter(None, PatternType::Unknown);
    assert!(unknown.validate().is_err());
    let mut unknown_op = filter(None, PatternType::Any);
    unknown_op.operation = AclOperation::from_code(99);
    assert!(unknown_op.validate().is_err());
}

#[test]
fn a_binding_record_round_trips_with_awkward_text() {
    let b = binding(
        ResourceType::Group,
        "tab\there%and=equals",
        PatternType::Prefixed,
        "User:CN=x,O=y",
        "*",
        AclOperation::DescribeConfigs,
        AclPermissionType::Deny,
    );
    let value = b.encode_value();
    assert_eq!(AclBinding::decode_value(&value), Ok(b));
    assert!(AclBinding::decode_value(b"resource_type=1").is_err());
}

#[test]
fn the_authorizer_settings_parse_as_kafka_names_them() {
    assert!(!AuthorizerConfig::parse("", false, "").unwrap().enabled());
    let config = AuthorizerConfig::parse(
        authorizer::STANDARD_AUTHORIZER,
        true,
        "User:a; User:CN=b,O=c",
    )
    .unwrap();
    let settings = config.settings.unwrap();
    assert!(settings.allow_everyone_if_no_acl_found);
    assert_eq!(settings.super_users, vec!["User:a", "User:CN=b,O=c"]);
    assert!(
        AuthorizerConfig::parse(authorizer::ACL_AUTHORIZER, false, "")
            .unwrap()
            .enabled()
    );
    assert!(AuthorizerConfig::parse("com.example.Mine", false, "").is_err());
    assert!(AuthorizerConfig::parse("", false, "alice").is_err());
}

#[test]
fn a_certificate_subject_prints_as_kafka_prints_it() {
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    let mut dn = rcgen::DistinguishedName::new();
    dn.push(rcgen::DnType::CountryName, "DE");
    dn.push(rcgen::DnType::OrganizationName, "Example, Inc");
    dn.push(rcgen::DnType::CommonName, "client1");
    params.distinguished_name = dn;
    let key = rcgen::KeyPair::generate().unwrap();
    let certificate = params.self_signed(&key).unwrap();
    assert_eq!(
        principal::subject_dn(certificate.der()).as_deref(),
        Some("CN=client1,O=Example\\, Inc,C=DE")
    );
}

/// A group's operations are Kafka 3.9's, as librdkafka's 0081 expects of a 3.9 broker.
#[test]
fn a_group_s_authorized_operations_are_read_describe_delete() {
    let bits = authorized_operations(
        &AuthorizerConfig::default(),
        &[],
        ALICE,
        ResourceType::Group,
        "g",
    );
    assert_eq!(bits, (1 << 3) | (1 << 8) | (1 << 6));
}
