//! The partitions this node runs, as the topic controller's image decides (topic_image.rs,
//! retention.rs, delete_records.rs): started, stopped, forgotten after a storage error,
//! recovered ahead at start-up, their log starts cut by retention and DeleteRecords. The
//! image and the controller's state are `handlers.topics`; what they decide is done here,
//! because it touches the node's own bookkeeping (partition table, producer state, metrics,
//! waiters, answer slots).

use super::super::*;

/// How long one loop turn runs queued topic changes (`Node::run_topic_changes`): a partition's
/// start takes 1.5-2.5 ms of file creation and syncs on an idle disk, so a hundred-partition
/// topic held every node's loop 100-250 ms in one turn until 2026-12-06.
const TOPIC_CHANGES_BUDGET: std::time::Duration = std::time::Duration::from_millis(3);

impl Node {
    /// Brings the metadata images up to the metadata partition's key-value state (which holds
    /// the latest snapshot plus every committed record applied after it, snapshots.rs): ACLs,
    /// SCRAM credentials, dynamic node configs, and the topic image, queueing the starts of new
    /// topics' partitions and the stops of deleted ones (topic_image.rs, `PendingTopicChange`),
    /// which `run_topic_changes` runs a few milliseconds at a time; then, once none is left,
    /// answers the admin requests waiting for them.
    pub(in crate::node) fn apply_metadata_records(&mut self) -> Result<(), NodeError> {
        // Between work lists, like the rest of this: retention's snapshots are reported to
        // the core by the same pump round.
        let began = Instant::now();
        self.maybe_enforce_retention()?;
        self.stall.part(began, "pump: retention");
        let began = Instant::now();
        self.maybe_balance_leaders()?;
        self.stall.part(began, "pump: leader balance");
        let began = Instant::now();
        let changes = topic_image::apply_images(&mut self.handlers, &self.host, &self.table);
        self.stall.part(began, "pump: metadata image");
        if let Some(changes) = changes {
            use topic_image::PendingTopicChange as Pending;
            for change in changes {
                match change {
                    topic_image::TopicChange::Deleted(topic) => {
                        self.topic_changes.push_back(Pending::Delete(topic))
                    }
                    topic_image::TopicChange::Started {
                        topic,
                        from,
                        config_changed,
                    } => {
                        for index in from..topic.partitions {
                            if topic_image::hosts_partition(&self.config, &topic, index) {
                                self.topic_changes.push_back(Pending::Start {
                                    topic: topic.clone(),
                                    index,
                                });
                            }
                        }
                        self.topic_changes.push_back(Pending::Settle {
                            topic,
                            from,
                            config_changed,
                        });
                    }
                }
            }
            self.topic_changes.push_back(Pending::Sweep {
                applied: self.handlers.topics.applied_offset,
            });
            self.ask_folders_ahead()?;
        }
        let began = Instant::now();
        self.run_topic_changes()?;
        self.stall.part(began, "pump: topic changes");
        // Admin requests are answered once this node has done what the records they wait for
        // asked of it (a created topic's partitions started here).
        if self.topic_changes.is_empty() {
            let began = Instant::now();
            self.answer_admin()?;
            self.stall.part(began, "pump: admin answers");
        }
        Ok(())
    }

    /// Runs the queued topic changes in order, for at most `TOPIC_CHANGES_BUDGET` per loop
    /// turn (`pump` clears `topic_changes_until`, and at least one change runs in each turn):
    /// the loop wakes again at once while some are left (`has_topic_changes`).
    pub(in crate::node) fn run_topic_changes(&mut self) -> Result<(), NodeError> {
        use topic_image::PendingTopicChange as Pending;
        let first_this_turn = self.topic_changes_until.is_none();
        let until = *self
            .topic_changes_until
            .get_or_insert_with(|| Instant::now() + TOPIC_CHANGES_BUDGET);
        let mut may_run = first_this_turn || Instant::now() < until;
        while may_run && !self.start_waits_for_folder() {
            let Some(change) = self.topic_changes.pop_front() else {
                break;
            };
            let ask_again = matches!(change, Pending::Delete(_) | Pending::Sweep { .. });
            match change {
                Pending::Start { topic, index } => self.start_partition(&topic, index)?,
                Pending::Settle {
                    topic,
                    from,
                    config_changed,
                } => topic_image::apply_topic_settings(
                    &mut self.host,
                    &self.table,
                    &self.config,
                    &topic,
                    from,
                    config_changed,
                ),
                Pending::Delete(topic) => self.stop_topic(&topic)?,
                Pending::Sweep { applied } => partition_dirs::sweep_leftovers(
                    &mut self.handlers.topics.swept,
                    &mut self.host,
                    &self.config.metadata_log_dir,
                    applied,
                )?,
            }
            if ask_again {
                self.ask_folders_ahead()?;
            }
            may_run = Instant::now() < until;
        }
        Ok(())
    }

    /// Whether topic changes wait to be run (the loop then does not sleep); not while the
    /// next is a start whose folder the `folder-prep` thread is making (its report wakes
    /// the loop).
    pub(in crate::node) fn has_topic_changes(&self) -> bool {
        !self.topic_changes.is_empty() && !self.start_waits_for_folder()
    }

    /// Whether the next queued change is a start whose folder is being made (folder_prep.rs).
    fn start_waits_for_folder(&self) -> bool {
        match self.topic_changes.front() {
            Some(topic_image::PendingTopicChange::Start { topic, index }) => {
                self.folder_prep.waiting(&topic_image::partition_dir(
                    &self.config,
                    &topic.name,
                    *index,
                ))
            }
            _ => false,
        }
    }

    /// Asks the `folder-prep` thread for the folders of the queued starts whose folder is not
    /// there yet, up to the first queued stop or sweep (which may remove folders of the same
    /// names: a topic deleted and created again): they are made and synced together while
    /// the loop goes on (folder_prep.rs). Run when changes are queued and after a stop or a
    /// sweep, not every turn: a thousand-partition topic's queue is walked a few times.
    fn ask_folders_ahead(&mut self) -> Result<(), NodeError> {
        use topic_image::PendingTopicChange as Pending;
        for change in &self.topic_changes {
            match change {
                Pending::Start { topic, index } => {
                    let dir = topic_image::partition_dir(&self.config, &topic.name, *index);
                    if !self.folder_prep.knows(&dir)
                        && self.offline_partition_error(&topic.name, *index).is_none()
                        && !dir.exists()
                    {
                        self.folder_prep.ask(
                            &dir,
                            topic.topic_id,
                            self.handlers.topics.applied_offset,
                        )?;
                    }
                }
                Pending::Settle { .. } => {}
                Pending::Delete(_) | Pending::Sweep { .. } => break,
            }
        }
        Ok(())
    }

    /// Opens (or recovers) a topic partition and starts its Raft group (topic_image.rs,
    /// `open_partition`), with its producer state and metrics.
    pub(in crate::node) fn start_partition(
        &mut self,
        topic: &topics::TopicRecord,
        index: i32,
    ) -> Result<(), NodeError> {
        if let Some(error) = self.offline_partition_error(&topic.name, index) {
            // Taken offline by a storage error: it stays so until the node restarts.
            tracing::warn!(topic = %topic.name, index, error, "not starting an offline partition");
            return Ok(());
        }
        let now = self.now_ms();
        let folder_made = self.folder_prep.take(&topic_image::partition_dir(
            &self.config,
            &topic.name,
            index,
        ));
        let (id, dir, recovered) = topic_image::open_partition(
            &mut self.host,
            &mut self.table,
            &self.config,
            self.handlers.topics.applied_offset,
            (topic, index),
            folder_made,
            now,
        )?;
        self.handlers.producers.adopt_preopened(id, &dir);
        // After a crash: the batches its recovery took unread, checked behind the start.
        let (unverified, truncations) = self.host.take_unverified(id);
        if let Some(log_config) = self.host.store(id).map(|store| store.log.config().clone()) {
            self.listed_checks
                .submit(id, dir.clone(), truncations, unverified, &log_config)?;
        }
        // Idempotent producing's state exists from the partition's start and follows every
        // append, the follower's too: a follower that becomes leader answers its first Produce
        // without reading its whole log on the loop (seen in scripts/fault-run.sh as 1.5-6 s
        // turns on a new leader of a topic created while the node ran). A new partition's
        // log is empty, so this reads nothing; a preopened one was read before the loop.
        self.handlers.producers.ensure(&mut self.host, id)?;
        self.observer
            .add_partition(id, self.table.dir_name(id), &dir);
        tracing::info!(partition = id, dir = %dir.display(), ?recovered, "partition started");
        Ok(())
    }

    /// Stops every partition of a topic that left the image and removes its folders
    /// (delete_topics.rs).
    pub(in crate::node) fn stop_topic(
        &mut self,
        topic: &topics::TopicRecord,
    ) -> Result<(), NodeError> {
        for id in topic_image::topic_partition_ids(&self.table, topic) {
            self.stop_partition(id, topic.topic_id)?;
        }
        self.remote_leaders.forget(&topic.name);
        tracing::info!(topic = %topic.name, "topic deleted");
        Ok(())
    }

    /// Takes one partition out of the node. Called between work lists (from `pump`), so no
    /// work of the partition is half executed; what still refers to it is dropped here.
    pub(in crate::node) fn stop_partition(
        &mut self,
        id: PartitionId,
        topic_id: crate::protocol::wire::Uuid,
    ) -> Result<(), NodeError> {
        self.handlers.produces.fail_partition(
            &cx!(self),
            id,
            ErrorCode::UnknownTopicOrPartition,
        )?;
        // The host drops the partition's core, queued reports and held messages, and closes
        // its log after its in-flight I/O (other logs' completions stay in the ring).
        let dir = self.host.remove_partition(id);
        self.forget_partition(id, crate::protocol::ErrorCode::UnknownTopicOrPartition)?;
        let Some(dir) = dir else {
            return Ok(());
        };
        partition_dirs::remove_partition_dir(&dir, topic_id).map_err(NodeError::Runtime)?;
        Ok(())
    }

    /// At start-up, before the loop serves: recovers the partitions of every topic this node
    /// knows from its own metadata log whose folder is here (topic_image.rs, `preopen_list`),
    /// and reads their producer state, so that starting them when the committed topic image
    /// reaches them takes no recovery on the event loop.
    pub(in crate::node) fn preopen_partitions(&mut self) -> Result<(), NodeError> {
        let started = std::time::Instant::now();
        let (topics, folders) =
            topic_image::preopen_list(&mut self.host, &self.table, &self.config)?;
        let mut opened = 0;
        // Where the time goes: the logs' recovery, and the producer state read after each
        // partition's saved file.
        let (mut logs, mut producer_state) = (Duration::ZERO, Duration::ZERO);
        for (dir, log_config) in folders {
            let began = Instant::now();
            let preopened = self.host.preopen(dir.clone(), log_config);
            logs += began.elapsed();
            match preopened {
                Ok(()) => {
                    let began = Instant::now();
                    self.handlers
                        .producers
                        .read_preopened(&mut self.host, &dir)?;
                    producer_state += began.elapsed();
                    opened += 1;
                }
                Err(error) => {
                    tracing::warn!(dir = %dir.display(), %error, "not recovered ahead; it is opened when started")
                }
            }
        }
        tracing::info!(
            topics,
            partitions = opened,
            took_ms = started.elapsed().as_millis() as u64,
            logs_ms = logs.as_millis() as u64,
            producer_state_ms = producer_state.as_millis() as u64,
            "partitions recovered before serving"
        );
        Ok(())
    }

    /// Applies the retention rules to every `cleanup.policy=delete` partition (retention.rs),
    /// and lets followers' log starts follow their leaders' (delete_records.rs). Runs between
    /// work lists: the snapshots it records are reported to the core by
    /// `report_snapshots_written`.
    pub(in crate::node) fn maybe_enforce_retention(&mut self) -> Result<(), NodeError> {
        let now = self.now_ms();
        if std::mem::take(&mut self.handlers.delete_records.follow_due) {
            self.follow_leader_log_starts()?;
        }
        if !self.handlers.topics.retention_check_due(now) {
            return Ok(());
        }
        // Followers' log starts follow their leaders' (DeleteRecords, delete_records.rs).
        self.follow_leader_log_starts()?;
        let now_wall_ms = wall_clock_ms().max(0) as u64;
        self.handlers
            .producers
            .expire(self.config.producer_id_expiration_ms, now_wall_ms);
        let snapshots =
            self.handlers
                .topics
                .retention_snapshots(&self.host, &self.table, now_wall_ms);
        self.record_empty_snapshots(snapshots)
    }

    /// delete_records.rs, `follow_leader_log_starts`: the snapshots it asks for, recorded.
    pub(in crate::node) fn follow_leader_log_starts(&mut self) -> Result<(), NodeError> {
        let snapshots = delete_records::follow_leader_log_starts(
            &mut self.host,
            &self.table,
            &self.handlers.topics,
            wall_clock_ms().max(0) as u64,
        )?;
        self.record_empty_snapshots(snapshots)
    }

    /// Records the empty snapshots retention, DeleteRecords or a follower following its
    /// leader's log start decided (retention.rs, delete_records.rs), each with its partition's
    /// producer state at its end offset (idempotence.rs): the producers' state outlives their
    /// batches. A DeleteRecords cut that cannot be recorded answers its partition
    /// KAFKA_STORAGE_ERROR; any other failure is the node's.
    pub(in crate::node) fn record_empty_snapshots(
        &mut self,
        snapshots: Vec<retention::EmptySnapshot>,
    ) -> Result<(), NodeError> {
        for snapshot in snapshots {
            let producer_state = self.handlers.producers.state_record(
                &mut self.host,
                &self.table,
                snapshot.partition,
                snapshot.snapshot_id.offset,
            );
            let recorded = self.host.record_empty_snapshot(
                snapshot.partition,
                snapshot.snapshot_id,
                snapshot.now_wall_ms,
                producer_state,
            );
            match recorded {
                Ok(()) => snapshot.recorded(),
                Err(error)
                    if matches!(
                        snapshot.cause,
                        retention::SnapshotCause::DeleteRecords { .. }
                    ) =>
                {
                    tracing::error!(partition = snapshot.partition, %error, "DeleteRecords: recording the cut");
                    self.handlers.delete_records.cut_failed(&snapshot);
                }
                Err(error) => return Err(error.into()),
            }
        }
        Ok(())
    }

    /// DeleteRecords (delete_records.rs): the cuts the leader makes are recorded here
    /// (`record_empty_snapshots`), then what is done is answered.
    pub(in crate::node) fn handle_delete_records(
        &mut self,
        responder: Responder,
        header: &crate::protocol::RequestHeader,
        request: crate::protocol::delete_records_request::DeleteRecordsRequest,
    ) -> Result<(), NodeError> {
        let mut cx = cx!(self);
        let cuts = self.handlers.delete_records.handle_delete_records(
            &mut cx,
            &self.handlers.topics,
            responder,
            header,
            request,
        )?;
        self.record_empty_snapshots(cuts)?;
        let now = self.now_ms();
        self.handlers
            .delete_records
            .answer_ready(&self.host, &self.config, now)?;
        self.after_call()
    }

    /// A segment's listed batches checked behind the start (listed_checks.rs). Damage to
    /// batches the partition still holds restarts it with that segment read at open, which sets
    /// the segment and every later one aside and fetches their records again from a peer
    /// (docs/node.md, "Storage faults"); with no peer, the partition goes offline.
    pub(in crate::node) fn on_listed_checked(
        &mut self,
        checked: listed_checks::ListedChecked,
    ) -> Result<(), NodeError> {
        let host = &self.host;
        let verdict = self.listed_checks.on_checked(&checked, || {
            host.still_holds(checked.partition, &checked.batches, checked.truncations)
        });
        let id = checked.partition;
        match verdict {
            listed_checks::Verdict::Nothing => Ok(()),
            listed_checks::Verdict::AllReadBack { dir } => {
                tracing::info!(
                    partition = id,
                    dir = %dir.display(),
                    "listed batches checked after a crash: all read back"
                );
                Ok(())
            }
            listed_checks::Verdict::Damaged {
                base_offset,
                reason,
            } => {
                let hosted = self.table.get(id).clone();
                tracing::error!(
                    partition = id,
                    dir = %self.table.dir_name(id),
                    segment = base_offset,
                    reason,
                    "a batch taken unread after a crash does not read back: the partition restarts to repair the segment from a peer"
                );
                let Some(topic) = self.handlers.topics.image.get(&hosted.topic).cloned() else {
                    return Ok(());
                };
                let dir = self.host.remove_partition(id);
                self.forget_partition(id, ErrorCode::NotLeaderOrFollower)?;
                if let Some(dir) = &dir {
                    let mut io = ringlog_engine::io::SyscallIo::for_dir(dir);
                    ringlog_engine::log::PartitionLog::check_at_next_open(
                        &mut io,
                        dir,
                        base_offset,
                    )
                    .map_err(|error| NodeError::Storage(error.into()))?;
                }
                match self.start_partition(&topic, hosted.index) {
                    Ok(()) => Ok(()),
                    // No peer to repair from (a single replica): the partition stays down,
                    // the node goes on (docs/node.md, "Storage faults").
                    Err(NodeError::Storage(error)) => {
                        tracing::error!(
                            topic = %hosted.topic,
                            index = hosted.index,
                            %error,
                            "the damaged partition cannot start: offline until the file is restored"
                        );
                        self.offline
                            .record((hosted.topic.clone(), hosted.index), error.to_string());
                        Ok(())
                    }
                    Err(error) => Err(error),
                }
            }
        }
    }

    /// Forgets a partition the host no longer runs (its topic was deleted, or a storage error
    /// took it offline): what waits on it is answered `code`, lookups skip it.
    pub(in crate::node) fn forget_partition(
        &mut self,
        id: PartitionId,
        code: ErrorCode,
    ) -> Result<(), NodeError> {
        self.handlers
            .produces
            .fail_partition(&cx!(self), id, code)?;
        self.observer.remove_partition(id);
        self.listed_checks.forget(id);
        // Lookups skip it from now on: peer messages and client requests for it are answered
        // UNKNOWN_TOPIC_OR_PARTITION, late responses are refused by the core (no group).
        self.table.remove(id);
        self.last_leader.remove(&id);
        let q = qx!(self);
        self.quorum.forget_partition(&q, id, code)?;
        Ok(())
    }
}
