//! Addresses in the quorum's keys: `host:port`, `controller.quorum.voters` (`id@host:port`,
//! comma separated), `controller.quorum.bootstrap.servers` and `controller.quorum.observers`.

/// A voter of the quorum as `controller.quorum.voters` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoterAddress {
    pub node_id: i32,
    pub host: String,
    pub port: u16,
}

pub(super) fn split_host_port(text: &str) -> Result<(String, u16), String> {
    let (host, port) = text
        .rsplit_once(':')
        .ok_or_else(|| format!("{text:?} is not host:port"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| format!("{port:?} is not a port"))?;
    if host.is_empty() {
        return Err(format!("{text:?} has no host"));
    }
    Ok((
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
        port,
    ))
}

/// The entries of a comma-separated list, trimmed, empty ones skipped.
fn list_entries(text: &str) -> impl Iterator<Item = &str> {
    text.split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
}

/// A voter's or an observer's node id (`role` names it in the error): a non-negative integer.
fn parse_node_id(text: &str, role: &str) -> Result<i32, String> {
    let node_id: i32 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a node id"))?;
    if node_id < 0 {
        return Err(format!("{role} id {node_id} is negative"));
    }
    Ok(node_id)
}

/// Parse `host:port,host:port` (`controller.quorum.bootstrap.servers`); empty: none.
pub(super) fn parse_bootstrap_servers(text: &str) -> Result<Vec<(String, u16)>, String> {
    list_entries(text).map(split_host_port).collect()
}

/// Parse `1@host:port,2@host:port`: ids unique, at least one voter.
pub fn parse_voters(text: &str) -> Result<Vec<VoterAddress>, String> {
    let mut voters: Vec<VoterAddress> = Vec::new();
    for entry in list_entries(text) {
        let (id, address) = entry
            .split_once('@')
            .ok_or_else(|| format!("{entry:?} is not id@host:port"))?;
        let node_id = parse_node_id(id, "voter")?;
        let (host, port) = split_host_port(address)?;
        if voters.iter().any(|voter| voter.node_id == node_id) {
            return Err(format!("voter {node_id} is listed twice"));
        }
        voters.push(VoterAddress {
            node_id,
            host,
            port,
        });
    }
    if voters.is_empty() {
        return Err("no voters".into());
    }
    Ok(voters)
}

/// `controller.quorum.observers`: node ids, comma separated (empty: no observers).
pub fn parse_observers(text: &str) -> Result<Vec<i32>, String> {
    let mut observers: Vec<i32> = Vec::new();
    for entry in list_entries(text) {
        let node_id = parse_node_id(entry, "observer")?;
        if observers.contains(&node_id) {
            return Err(format!("observer {node_id} is listed twice"));
        }
        observers.push(node_id);
    }
    Ok(observers)
}
