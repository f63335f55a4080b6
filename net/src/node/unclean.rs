//! `ringlog unclean-recover`: make a surviving replica the leader of a partition whose quorum
//! lost a majority of its voters for good. Opt-in and loud: it can lose acknowledged records.
//!
//! Raft never truncates committed records, so without a majority the partition stays without
//! a leader forever. The operator can choose availability instead, like Kafka's unclean leader
//! election: this tool, run on the stopped survivor,
//!
//! 1. opens the partition's log (recovering it as `serve` would) and reads its quorum-state;
//! 2. picks a new leader epoch larger than any the survivor knows (its quorum-state epoch and
//!    the last epoch of its log), or the operator's `--leader-epoch` if larger (the lost voters
//!    may have reached epochs the survivor never saw; consumers that saw them would answer
//!    UNKNOWN_LEADER_EPOCH until the new leader's epoch passes them);
//! 3. writes the survivor's quorum-state: that epoch, voted for itself, the new voter set the
//!    operator names (the survivor plus, optionally, fresh empty nodes);
//! 4. rewrites `controller.quorum.voters` in the survivor's properties file (the old file is
//!    kept next to it as `<file>.before-unclean-recover`).
//!
//! On restart the survivor stands for election at the next epoch with the new voter set; fresh
//! voters vote for it (their logs are empty) and then follow its log. The new leader writes its
//! LeaderChangeMessage at its own log end offset, so every record the lost voters had beyond it
//! is gone: a KIP-320 consumer that read them finds out through DivergingEpoch or
//! OffsetForLeaderEpoch (the end offset of its epoch is the survivor's log end offset).

use std::path::{Path, PathBuf};

use ringlog_engine::io::AnyIo;
use ringlog_engine::log::{LogConfig, LogError, PartitionLog};
use ringlog_engine::quorum_state::{
    QUORUM_STATE_FILE_NAME, QuorumStateData, QuorumStateError, Voter,
};

use crate::config::{NodeConfig, VoterAddress};
use crate::data_dir_lock::DataDirLock;
use crate::meta_properties::{MetaProperties, MetaPropertiesError};

#[derive(Debug, thiserror::Error)]
pub enum UncleanRecoveryError {
    #[error(transparent)]
    Meta(#[from] MetaPropertiesError),
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    QuorumState(#[from] QuorumStateError),
    #[error(transparent)]
    IoBackend(#[from] ringlog_engine::io::BackendChoiceError),
    #[error(transparent)]
    DataDirLock(#[from] crate::data_dir_lock::DataDirLockError),
    #[error("{path}: {source}")]
    File {
        path: String,
        source: std::io::Error,
    },
    #[error("refused: {0}")]
    Refused(String),
}

/// What the recovery did, for the operator's record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UncleanRecovery {
    pub partition_dir: PathBuf,
    /// The survivor's log end offset: every offset at or past it that others had is lost.
    pub log_end_offset: i64,
    /// The last epoch in the survivor's log (-1 if empty).
    pub last_log_epoch: i32,
    /// The epoch the survivor's quorum-state had.
    pub previous_epoch: i32,
    /// The epoch written; the first election after restart is for the next one.
    pub new_epoch: i32,
    pub voters: Vec<VoterAddress>,
    pub config_backup: PathBuf,
}

/// Recovers `<topic>-<partition>` of the node configured by `config_path` around the voters
/// `new_voters` (which must include the node). The node must not be running.
pub fn unclean_recover(
    config_path: &Path,
    topic: &str,
    partition: i32,
    new_voters: &[VoterAddress],
    min_leader_epoch: Option<i32>,
) -> Result<UncleanRecovery, UncleanRecoveryError> {
    let config = NodeConfig::load(config_path)
        .map_err(|error| UncleanRecoveryError::Refused(error.to_string()))?;
    if !new_voters.iter().any(|v| v.node_id == config.node_id) {
        return Err(UncleanRecoveryError::Refused(format!(
            "the new voter set must include this node ({})",
            config.node_id
        )));
    }
    let meta = MetaProperties::check(&config.metadata_log_dir, config.node_id, None)?;
    let dir = config.metadata_log_dir.join(format!("{topic}-{partition}"));
    if !dir.is_dir() {
        return Err(UncleanRecoveryError::Refused(format!(
            "{} does not exist: this node holds no replica of {topic}-{partition}",
            dir.display()
        )));
    }
    refuse_if_running(&config)?;
    // A node still recovering its logs listens nowhere yet: the folder's lock finds it too.
    let _data_dir_lock = DataDirLock::acquire(&config.metadata_log_dir)?;

    let mut io = AnyIo::from_env(Some(&config.metadata_log_dir))?;
    let log_config = LogConfig {
        segment_size_bytes: config.segment_size_bytes,
        max_batch_size_bytes: (config.message_max_bytes as usize)
            .max(ringlog_engine::batch::DEFAULT_MAX_BATCH_SIZE_BYTES),
        ..LogConfig::default()
    };
    let (log, _report) = PartitionLog::open(&mut io, &dir, log_config)?;
    let log_end_offset = log.log_end_offset();
    let last_log_epoch = log.latest_epoch().unwrap_or(-1);
    log.close(&mut io)?;

    let path = dir.join(QUORUM_STATE_FILE_NAME);
    let previous = QuorumStateData::load(&mut io, &path)?;
    let previous_epoch = previous.as_ref().map_or(0, |s| s.leader_epoch);
    let new_epoch = (previous_epoch.max(last_log_epoch) + 1).max(min_leader_epoch.unwrap_or(0));
    let mut state = QuorumStateData::initial(
        &meta.cluster_id,
        &new_voters.iter().map(|v| v.node_id).collect::<Vec<_>>(),
    );
    state.leader_epoch = new_epoch;
    state.voted_id = config.node_id;
    state.current_voters = Some(
        new_voters
            .iter()
            .map(|v| Voter {
                voter_id: v.node_id,
            })
            .collect(),
    );
    state.persist(&mut io, &path)?;

    let config_backup = rewrite_voters(config_path, new_voters)?;
    tracing::warn!(
        partition = %format!("{topic}-{partition}"),
        log_end_offset,
        last_log_epoch,
        previous_epoch,
        new_epoch,
        voters = %format_voters(new_voters),
        "UNCLEAN RECOVERY: this replica will lead with whatever its log holds; records other \
         voters had at or after offset {log_end_offset} are lost"
    );
    Ok(UncleanRecovery {
        partition_dir: dir,
        log_end_offset,
        last_log_epoch,
        previous_epoch,
        new_epoch,
        voters: new_voters.to_vec(),
        config_backup,
    })
}

/// A running node holds its listener: refuse if the port answers.
fn refuse_if_running(config: &NodeConfig) -> Result<(), UncleanRecoveryError> {
    let probe = std::net::TcpStream::connect_timeout(
        &config.listeners.client.address,
        std::time::Duration::from_millis(200),
    );
    if probe.is_ok() {
        return Err(UncleanRecoveryError::Refused(format!(
            "something listens on {}: stop the node first",
            config.listeners.client.address
        )));
    }
    Ok(())
}

pub fn format_voters(voters: &[VoterAddress]) -> String {
    voters
        .iter()
        .map(|v| format!("{}@{}:{}", v.node_id, v.host, v.port))
        .collect::<Vec<_>>()
        .join(",")
}

/// Replaces the `controller.quorum.voters` line (keeping a backup of the file).
fn rewrite_voters(
    config_path: &Path,
    new_voters: &[VoterAddress],
) -> Result<PathBuf, UncleanRecoveryError> {
    let file_error = |path: &Path, source| UncleanRecoveryError::File {
        path: path.display().to_string(),
        source,
    };
    let text = std::fs::read_to_string(config_path).map_err(|e| file_error(config_path, e))?;
    let mut backup = config_path.as_os_str().to_owned();
    backup.push(".before-unclean-recover");
    let backup = PathBuf::from(backup);
    std::fs::write(&backup, &text).map_err(|e| file_error(&backup, e))?;
    let line = format!("controller.quorum.voters={}", format_voters(new_voters));
    let mut replaced = false;
    let mut out = String::new();
    for l in text.lines() {
        if l.trim_start().starts_with("controller.quorum.voters") && l.contains('=') {
            out.push_str(&line);
            replaced = true;
        } else {
            out.push_str(l);
        }
        out.push('\n');
    }
    if !replaced {
        out.push_str(&line);
        out.push('\n');
    }
    let tmp = config_path.with_extension("tmp");
    std::fs::write(&tmp, out).map_err(|e| file_error(&tmp, e))?;
    std::fs::rename(&tmp, config_path).map_err(|e| file_error(config_path, e))?;
    Ok(backup)
}
