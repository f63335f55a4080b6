//! ACLs and the authorizer, end to end with confluent-kafka against real `ringlog serve`
//! processes (tests/clients/acls.py): bindings created, described and deleted through the
//! metadata log and still there after every node restarted; StandardAuthorizer's rules
//! enforced on Produce (a DENY wins, `allow.everyone.if.no.acl.found=false` refuses a topic
//! without ACLs, a super user passes); and without an authorizer the ACL APIs answer
//! SECURITY_DISABLED while the authorized operations are all of a resource type's.

use std::time::Duration;

mod quorum;
use quorum::{Quorum, run_client_script, serial};

const STANDARD_AUTHORIZER: &str =
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer";

/// Sets `key=value` in every node's properties file, replacing the key's line if any.
fn set_property(quorum: &Quorum, key: &str, value: &str) {
    for node in &quorum.nodes {
        let path = quorum
            .dir
            .path()
            .join(format!("node-{}.properties", node.id));
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines: Vec<String> = text
            .lines()
            .filter(|l| l.split_once('=').is_none_or(|(k, _)| k.trim() != key))
            .map(str::to_string)
            .collect();
        lines.push(format!("{key}={value}"));
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    }
}

fn restart_all(quorum: &mut Quorum) {
    quorum.kill_all();
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(30));
}

#[test]
fn acls_round_trip_survive_restarts_and_are_enforced_on_produce() {
    let _serial = serial();
    let mut quorum = Quorum::format_with(
        3,
        &format!("{STANDARD_AUTHORIZER}\nallow.everyone.if.no.acl.found=true"),
    );
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(20));
    let bootstrap = quorum.bootstrap();
    let mut phases = Vec::new();
    run_client_script(
        &mut quorum,
        &bootstrap,
        "acls.py",
        "authorizer",
        Duration::from_secs(400),
        |quorum, line| {
            match line {
                // The bindings live in the metadata log: a restart of every node keeps them.
                "RESTART" => restart_all(quorum),
                // A topic without any ACL is refused once everyone is no longer allowed.
                "STRICT" => {
                    set_property(quorum, "allow.everyone.if.no.acl.found", "false");
                    restart_all(quorum);
                }
                // A super user passes whatever the ACLs say.
                "SUPER" => {
                    set_property(quorum, "super.users", "User:ANONYMOUS");
                    restart_all(quorum);
                }
                _ => return None,
            }
            phases.push(line.to_string());
            Some("done\n".into())
        },
    );
    assert_eq!(phases, ["RESTART", "STRICT", "SUPER"]);
}

#[test]
fn without_an_authorizer_acl_apis_are_disabled_and_every_operation_is_authorized() {
    let _serial = serial();
    let mut quorum = Quorum::start(1);
    quorum.wait_for_leader(Duration::from_secs(20));
    let bootstrap = quorum.bootstrap();
    run_client_script(
        &mut quorum,
        &bootstrap,
        "acls.py",
        "disabled",
        Duration::from_secs(240),
        |_, _| None,
    );
}
