//! `ringlog dev`: a local three-voter quorum plus an observer on 127.0.0.1, supervised: a node
//! that exits is reported and, unless `--no-restart`, started again (docs/node.md). With
//! `--spares N`, nodes 5..=4+N run as observers too, configured like the others (each
//! `node-N.properties` works with `ringlog serve --config`), so that `ringlog add-voter` can
//! grow the metadata quorum to five voters and `ringlog remove-voter` shrink it back
//! (KIP-853; the commands are in the README).

use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};
use std::time::Duration;

use ringlog_net::client::Client;
use ringlog_net::config::NodeConfig;
use ringlog_net::meta_properties;

use crate::format;

/// How long `dev` waits before it starts a node that exited again (long enough to read the
/// message, short enough to watch the node rejoin).
const DEV_RESTART_DELAY: Duration = Duration::from_secs(1);

/// One node `dev` supervises: its files under the data folder and its process, if it runs.
struct DevNode {
    id: i32,
    port: u16,
    properties: PathBuf,
    /// `node-N.log`: the node's stderr, appended to across restarts.
    log_path: PathBuf,
    /// `node-N.pid`: the running process's id, for a user (or a test) who wants to kill it.
    pid_path: PathBuf,
    child: Option<Child>,
    /// When an exited node is started again (`None`: it runs, or stays down).
    restart_at: Option<std::time::Instant>,
}

impl DevNode {
    /// The node's role at the start (`add-voter` and `remove-voter` change it afterwards).
    fn role(&self) -> &'static str {
        match self.id {
            1..=3 => "voter",
            4 => "observer",
            _ => "spare observer",
        }
    }

    /// Starts the node's `serve` process, appending to its log, and writes its pid file.
    fn start(&mut self, exe: &Path) -> Result<u32, String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .map_err(|e| format!("{}: {e}", self.log_path.display()))?;
        let mut command = Process::new(exe);
        command
            .arg("serve")
            .arg("--config")
            .arg(&self.properties)
            .stdout(Stdio::null())
            .stderr(log);
        // The node gets SIGTERM when `dev` dies, even by kill -9: an orphaned node would hold
        // its port and data folder, and the next `dev` on this folder could not start it.
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command
            .spawn()
            .map_err(|e| format!("starting node {}: {e}", self.id))?;
        let pid = child.id();
        self.child = Some(child);
        self.restart_at = None;
        std::fs::write(&self.pid_path, format!("{pid}\n"))
            .map_err(|e| format!("{}: {e}", self.pid_path.display()))?;
        Ok(pid)
    }

    /// Whether the process of an earlier `dev` run on this folder still runs (its pid file is
    /// left, and a process with that id runs `ringlog serve` on this node's properties).
    fn still_running_from_earlier_run(&self) -> Option<u32> {
        let pid: u32 = std::fs::read_to_string(&self.pid_path)
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let command_line = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let properties = self.properties.as_os_str().as_encoded_bytes();
        command_line
            .split(|b| *b == 0)
            .any(|argument| argument == properties)
            .then_some(pid)
    }
}

pub(crate) fn dev(
    data_dir: &Path,
    base_port: u16,
    restart: bool,
    segment_bytes: u64,
    spares: u16,
) -> Result<(), String> {
    std::fs::create_dir_all(data_dir).map_err(|e| format!("{}: {e}", data_dir.display()))?;
    let data_dir = data_dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", data_dir.display()))?;
    let cluster_file = data_dir.join("cluster.id");
    let cluster_id = match std::fs::read_to_string(&cluster_file) {
        Ok(text) => text.trim().to_string(),
        Err(_) => {
            let id = meta_properties::random_cluster_id().map_err(|e| e.to_string())?;
            std::fs::write(&cluster_file, &id)
                .map_err(|e| format!("{}: {e}", cluster_file.display()))?;
            id
        }
    };
    let count = 4 + spares;
    // Client listeners on base..base+count-1, controller listeners (the quorum's traffic,
    // `controller.listener.names`) on the `count` ports after them.
    let ports: Vec<u16> = (0..2 * count)
        .map(|index| {
            base_port.checked_add(index).ok_or_else(|| {
                format!(
                    "--base-port {base_port}: nodes need the next {} ports",
                    2 * count - 1
                )
            })
        })
        .collect::<Result<_, _>>()?;
    let controller_port = |port: u16| port + count;
    let mut nodes: Vec<DevNode> = (1..=i32::from(count))
        .zip(ports.iter().copied())
        .map(|(id, port)| DevNode {
            id,
            port,
            properties: data_dir.join(format!("node-{id}.properties")),
            log_path: data_dir.join(format!("node-{id}.log")),
            pid_path: data_dir.join(format!("node-{id}.pid")),
            child: None,
            restart_at: None,
        })
        .collect();
    if let Some((id, pid)) = nodes
        .iter()
        .find_map(|n| Some((n.id, n.still_running_from_earlier_run()?)))
    {
        return Err(format!(
            "node {id} of an earlier `ringlog dev` on {} still runs (pid {pid}); stop it first",
            data_dir.display()
        ));
    }
    // A node waits up to 10 s for its listener's address (a restarted node's predecessor may
    // still hold it), so a port held by another program, or by a `dev` on another folder, would
    // leave this quorum unstarted while the other one answered on its ports.
    if let Some((port, error)) = ports
        .iter()
        .find_map(|&port| Some((port, port_in_use(port)?)))
    {
        return Err(format!(
            "127.0.0.1:{port} is taken ({error}): another `ringlog dev` or another program \
             listens there; stop it, or give this one other ports with --base-port (it takes \
             {} in a row from the base)",
            2 * count
        ));
    }
    let voters = nodes[..3]
        .iter()
        .map(|n| format!("{}@127.0.0.1:{}", n.id, controller_port(n.port)))
        .collect::<Vec<_>>()
        .join(",");
    // Every node lists the observers (node 4 and the spares): a leader refuses replica fetches
    // from ids it does not know. A spare added as a voter stays listed: the node acts on the
    // voter set in its metadata log (KIP-853), its configuration only bootstraps it.
    let observers = nodes[3..]
        .iter()
        .map(|n| n.id.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    // A local playground on one disk: Kafka's 50 `__consumer_offsets` partitions of 100 MiB
    // segments, each reserved when created, would take 5 GiB per node at the first consumer
    // group; 10 partitions of at most 16 MiB take 160 MiB.
    let offsets_segment_bytes = segment_bytes.min(16 << 20);
    // Every node's client listener, the observers' too: a spare added as a voter is then named
    // at its client listener in Metadata.
    let voter_ports: Vec<(i32, u16)> = nodes.iter().map(|n| (n.id, n.port)).collect();
    for node in &mut nodes {
        let folder = data_dir.join(format!("node-{}", node.id));
        // Metadata sends clients to the other voters' client listeners.
        let voter_clients = voter_ports
            .iter()
            .filter(|(id, _)| *id != node.id)
            .map(|(id, port)| format!("{id}@127.0.0.1:{port}"))
            .collect::<Vec<_>>()
            .join(",");
        let text = format!(
            "node.id={}\ncontroller.quorum.voters={voters}\ncontroller.quorum.observers={observers}\n\
             listeners=PLAINTEXT://127.0.0.1:{},CONTROLLER://127.0.0.1:{}\n\
             controller.listener.names=CONTROLLER\nvoter.advertised.listeners={voter_clients}\n\
             metadata.log.dir={}\nmetadata.log.segment.bytes={segment_bytes}\n\
             offsets.topic.num.partitions=10\noffsets.topic.segment.bytes={offsets_segment_bytes}\n",
            node.id,
            node.port,
            controller_port(node.port),
            folder.display()
        );
        std::fs::write(&node.properties, text)
            .map_err(|e| format!("{}: {e}", node.properties.display()))?;
        if !folder.join("meta.properties").exists() {
            let config = NodeConfig::load(&node.properties).map_err(|e| e.to_string())?;
            format(&config, &cluster_id)?;
        }
    }
    let mut result = Ok(());
    for node in &mut nodes {
        match node.start(&exe) {
            Ok(pid) => say!(
                "node {} ({}): 127.0.0.1:{} (controller listener 127.0.0.1:{})   pid {pid}   log: {}",
                node.id,
                node.role(),
                node.port,
                controller_port(node.port),
                node.log_path.display()
            ),
            Err(message) => {
                result = Err(message);
                break;
            }
        }
    }
    if result.is_ok() {
        say!(
            "cluster {cluster_id}, data in {}; pids in node-N.pid; a node that exits is {}; \
             Ctrl-C stops everything",
            data_dir.display(),
            if restart {
                "restarted after 1 s"
            } else {
                "left down (--no-restart)"
            }
        );
        for spare in nodes.iter().filter(|n| n.id > 4) {
            say!(
                "spare node {id}: ringlog add-voter --bootstrap-server 127.0.0.1:{first} \
                 --node-id {id} --endpoint 127.0.0.1:{port}   (ringlog remove-voter \
                 --bootstrap-server 127.0.0.1:{first} --node-id {id} to remove it)",
                id = spare.id,
                first = base_port,
                port = controller_port(spare.port),
            );
        }
        result = supervise(&mut nodes, &exe, restart);
    }
    say!("stopping");
    for node in &nodes {
        if let Some(child) = &node.child {
            // SIGTERM: graceful (a leader resigns). The terminal's SIGINT may have come too.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        }
    }
    for node in &mut nodes {
        if let Some(mut child) = node.child.take() {
            match child.wait() {
                Ok(status) => say!("node {} stopped ({status})", node.id),
                Err(e) => say!("node {}: {e}", node.id),
            }
        }
        let _ = std::fs::remove_file(&node.pid_path);
    }
    result
}

/// Runs until Ctrl-C or SIGTERM: restarts nodes that exit (unless `restart` is false) and
/// prints every new leader.
fn supervise(nodes: &mut [DevNode], exe: &Path, restart: bool) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    // Every node, voter or not, names the metadata leader it follows (a removed voter keeps
    // running as an observer).
    let addresses: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    runtime.block_on(async {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .map_err(|e| format!("SIGTERM handler: {e}"))?;
        let mut hangup =
            ringlog_net::signals::hangup().map_err(|e| format!("SIGHUP handler: {e}"))?;
        let mut last: Option<(i32, i32)> = None;
        let mut ticker = tokio::time::interval(Duration::from_millis(300));
        loop {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => return Ok(()),
                _ = terminate.recv() => return Ok(()),
                _ = ringlog_net::signals::next(&mut hangup) => return Ok(()),
                _ = ticker.tick() => {
                    let now = std::time::Instant::now();
                    for node in nodes.iter_mut() {
                        let Some(child) = &mut node.child else { continue };
                        let Ok(Some(status)) = child.try_wait() else { continue };
                        node.child = None;
                        let _ = std::fs::remove_file(&node.pid_path);
                        if restart {
                            node.restart_at = Some(now + DEV_RESTART_DELAY);
                            say_err!(
                                "ringlog dev: node {} exited ({status}); restarting it in 1 s (see {})",
                                node.id,
                                node.log_path.display()
                            );
                        } else {
                            say_err!(
                                "ringlog dev: node {} exited ({status}); left down (--no-restart; see {})",
                                node.id,
                                node.log_path.display()
                            );
                        }
                    }
                    for node in nodes.iter_mut() {
                        if node.restart_at.is_some_and(|at| at <= now) {
                            let pid = node.start(exe)?;
                            say_err!("ringlog dev: node {} restarted (pid {pid})", node.id);
                        }
                    }
                    if let Some(view) = addresses.iter().find_map(|a| {
                        Client::connect(a, Duration::from_millis(200)).ok()?.describe_quorum().ok()
                    }) && view.partition.leader_id >= 0 {
                        let now = (view.partition.leader_id, view.partition.leader_epoch);
                        if last != Some(now) {
                            say!(
                                "leader: node {} ({}), epoch {}, high-watermark {}",
                                now.0,
                                view.leader_address().unwrap_or_default(),
                                now.1,
                                view.partition.high_watermark
                            );
                            last = Some(now);
                        }
                    }
                }
            }
        }
    })
}

/// Why the dev nodes could not listen on 127.0.0.1:`port`, if they could not.
fn port_in_use(port: u16) -> Option<std::io::Error> {
    // std's listener sets SO_REUSEADDR, as the node's does: a port whose last connections of
    // an earlier run linger in TIME_WAIT counts as free.
    std::net::TcpListener::bind(("127.0.0.1", port)).err()
}
