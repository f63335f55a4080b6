//! `ringlog add-voter`, `remove-voter` and `describe-quorum`: KIP-853 voter changes and
//! DescribeQuorum against a running quorum.

use super::*;

fn directory_id(text: Option<&str>) -> Result<[u8; 16], String> {
    match text {
        None => Ok([0; 16]),
        Some(text) => ringlog_net::meta_properties::parse_uuid_text(text)
            .ok_or_else(|| format!("--directory-id {text:?}: expected 22 characters of base64url")),
    }
}

/// The leader's answer: nothing on success, the error's name (and message) otherwise.
fn voter_change_result(
    what: &str,
    answer: Result<(i16, Option<String>), ringlog_net::client::ClientError>,
) -> Result<(), String> {
    let (code, message) = answer.map_err(|e| format!("{what}: {e}"))?;
    if code == 0 {
        println!("{what}: done");
        return Ok(());
    }
    let name = ringlog_net::protocol::ErrorCode::from_code(code)
        .map_or_else(|| format!("error {code}"), |e| e.name().to_string());
    Err(match message {
        Some(message) if !message.is_empty() => format!("{what}: {name}: {message}"),
        _ => format!("{what}: {name}"),
    })
}

pub(crate) fn add_voter(
    bootstrap: &str,
    node_id: i32,
    endpoint: &str,
    directory: Option<&str>,
    timeout_ms: i32,
) -> Result<(), String> {
    let directory = directory_id(directory)?;
    let (host, port) = endpoint
        .rsplit_once(':')
        .and_then(|(host, port)| Some((host.to_string(), port.parse::<u16>().ok()?)))
        .ok_or_else(|| format!("--endpoint {endpoint:?}: expected host:port"))?;
    let mut leader = ringlog_net::client::connect_to_leader(bootstrap, CLIENT_TIMEOUT)
        .map_err(|e| e.to_string())?;
    let cluster_id = leader.cluster_id().map_err(|e| e.to_string())?;
    let answer = leader.add_raft_voter(
        &cluster_id,
        node_id,
        directory,
        vec![("CONTROLLER".into(), host, port)],
        timeout_ms,
    );
    voter_change_result(&format!("add voter {node_id}"), answer)
}

pub(crate) fn remove_voter(
    bootstrap: &str,
    node_id: i32,
    directory: Option<&str>,
) -> Result<(), String> {
    let directory = directory_id(directory)?;
    let mut leader = ringlog_net::client::connect_to_leader(bootstrap, CLIENT_TIMEOUT)
        .map_err(|e| e.to_string())?;
    let cluster_id = leader.cluster_id().map_err(|e| e.to_string())?;
    let answer = leader.remove_raft_voter(&cluster_id, node_id, directory);
    voter_change_result(&format!("remove voter {node_id}"), answer)
}

// ---- describe-quorum ------------------------------------------------------------------------

pub(crate) fn describe_quorum(bootstrap: &str, topic: &str, partition: i32) -> Result<(), String> {
    let describe = |address: &str| {
        Client::connect(address, CLIENT_TIMEOUT)
            .and_then(|mut c| c.describe_quorum_of(topic, partition))
            .map_err(|e| e.to_string())
    };
    let error_name = |code: i16| {
        ringlog_net::protocol::ErrorCode::from_code(code)
            .map_or_else(|| format!("error {code}"), |e| e.name().to_string())
    };
    let mut view = describe(bootstrap)?;
    let unknown = ringlog_net::protocol::ErrorCode::UnknownTopicOrPartition.code();
    if view.partition.error_code == unknown {
        return Err(format!("{topic}-{partition}: {}", error_name(unknown)));
    }
    if view.partition.error_code != 0 {
        // Only the partition's leader describes its quorum; ask it.
        let leader = view
            .leader_address()
            .ok_or_else(|| format!("{topic}-{partition}: no leader elected yet"))?;
        view = describe(&leader)?;
    }
    let p = &view.partition;
    if p.error_code != 0 {
        return Err(format!(
            "{topic}-{partition}: the leader answered {}",
            error_name(p.error_code)
        ));
    }
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let max_lag = p
        .current_voters
        .iter()
        .map(|r| (p.high_watermark - r.log_end_offset).max(0))
        .max()
        .unwrap_or(0);
    let ids = |list: &[ringlog_net::protocol::describe_quorum_response::ReplicaState]| {
        list.iter()
            .map(|r| r.replica_id.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    println!("Partition:              {topic}-{partition}");
    println!("LeaderId:               {}", p.leader_id);
    println!("LeaderEpoch:            {}", p.leader_epoch);
    println!("HighWatermark:          {}", p.high_watermark);
    println!("MaxFollowerLag:         {max_lag}");
    println!("CurrentVoters:          [{}]", ids(&p.current_voters));
    println!("CurrentObservers:       [{}]", ids(&p.observers));
    println!();
    // KIP-853: each voter's directory id and endpoints (kafka-metadata-quorum describe --status).
    println!("{:<8} {:<24} Endpoints", "VoterId", "DirectoryId");
    for r in &p.current_voters {
        let endpoints = view
            .nodes
            .iter()
            .find(|n| n.node_id == r.replica_id)
            .map(|n| {
                n.listeners
                    .iter()
                    .map(|l| format!("{}://{}:{}", l.name, l.host, l.port))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_else(|| "-".into());
        println!(
            "{:<8} {:<24} {}",
            r.replica_id,
            ringlog_net::meta_properties::uuid_text(&r.replica_directory_id.0),
            endpoints
        );
    }
    // An observer's directory id is the one it fetches with: a voter's node id on a replaced
    // disk is listed here under its new one until it is removed and added again.
    if !p.observers.is_empty() {
        println!();
        println!("{:<10} DirectoryId", "ObserverId");
        for r in &p.observers {
            println!(
                "{:<10} {}",
                r.replica_id,
                ringlog_net::meta_properties::uuid_text(&r.replica_directory_id.0)
            );
        }
    }
    println!();
    println!(
        "{:<8} {:<14} {:<8} {:<20} {:<23} Status",
        "NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp"
    );
    let ago = |ts: i64| {
        if ts < 0 {
            "-".to_string()
        } else {
            format!("{} ms ago", (now_ms - ts).max(0))
        }
    };
    let rows = p
        .current_voters
        .iter()
        .map(|r| {
            (
                r,
                if r.replica_id == p.leader_id {
                    "Leader"
                } else {
                    "Follower"
                },
            )
        })
        .chain(p.observers.iter().map(|r| (r, "Observer")));
    for (r, status) in rows {
        println!(
            "{:<8} {:<14} {:<8} {:<20} {:<23} {}",
            r.replica_id,
            r.log_end_offset,
            (p.high_watermark - r.log_end_offset).max(0),
            ago(r.last_fetch_timestamp),
            ago(r.last_caught_up_timestamp),
            status
        );
    }
    Ok(())
}
