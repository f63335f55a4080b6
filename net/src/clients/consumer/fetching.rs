//! The consumer's Fetch: one request per leader for the partitions ready to fetch, and each
//! partition's answer applied (records, KIP-320 errors and DivergingEpoch, out of range).

use super::*;

impl<T: Transport> Consumer<T> {
    /// One Fetch per leader for the ready partitions. Returns the records and whether
    /// something transient went wrong (so `poll` backs off before the next round).
    pub(in crate::clients) fn fetch_once(
        &mut self,
        deadline: Instant,
    ) -> Result<(Vec<ConsumerRecord>, bool), ConsumerError> {
        let mut by_leader: BTreeMap<i32, Vec<(TopicPartition, FetchPosition, i32)>> =
            BTreeMap::new();
        for (tp, state) in &self.assignment {
            let (Some(position), Validation::Done, Some(leader)) =
                (state.position, state.validation, state.leader)
            else {
                continue;
            };
            let Some(leader_id) = leader.leader_id else {
                continue;
            };
            if position.offset < 0 {
                continue;
            }
            by_leader.entry(leader_id).or_default().push((
                tp.clone(),
                position,
                leader.leader_epoch,
            ));
        }
        let mut records = Vec::new();
        let mut trouble = by_leader.is_empty() && !self.assignment.is_empty();
        for (leader_id, partitions) in by_leader {
            let remaining_ms = deadline
                .saturating_duration_since(Instant::now())
                .as_millis()
                .min(i32::MAX as u128) as i32;
            // Once something arrived, the other leaders are asked without waiting.
            let max_wait_ms = if records.is_empty() {
                self.config.fetch_max_wait_ms.min(remaining_ms)
            } else {
                0
            };
            let request = self.fetch_request(&partitions, max_wait_ms);
            let response =
                match self
                    .transport
                    .request(Target::Node(leader_id), &request, FETCH_VERSION)
                {
                    Ok(Response::Fetch(response)) => response,
                    Ok(_) => return Err(ClientError::Protocol("not a Fetch answer".into()).into()),
                    Err(error) => {
                        tracing::debug!(leader_id, %error, "fetch failed: refreshing metadata");
                        self.metadata_stale = true;
                        trouble = true;
                        continue;
                    }
                };
            let top_error =
                ErrorCode::from_code(response.error_code).unwrap_or(ErrorCode::UnknownServerError);
            if !top_error.is_none() {
                self.metadata_stale = true;
                trouble = true;
                continue;
            }
            for topic in response.responses {
                for data in topic.partitions {
                    let tp = TopicPartition::new(topic.topic.clone(), data.partition_index);
                    let Some(&(_, position, _)) = partitions.iter().find(|(p, _, _)| *p == tp)
                    else {
                        continue;
                    };
                    trouble |= self.handle_partition_data(&tp, position, data, &mut records)?;
                }
            }
        }
        Ok((records, trouble))
    }

    pub(in crate::clients) fn fetch_request(
        &self,
        partitions: &[(TopicPartition, FetchPosition, i32)],
        max_wait_ms: i32,
    ) -> Request {
        let mut topics: Vec<fetch_request::FetchTopic> = Vec::new();
        for (tp, position, leader_epoch) in partitions {
            let partition = fetch_request::FetchPartition {
                partition: tp.partition,
                // KIP-320: the leader epoch we believe current (fencing) and the epoch of the
                // record before the fetch offset (truncation detection).
                current_leader_epoch: *leader_epoch,
                fetch_offset: position.offset,
                last_fetched_epoch: position.offset_epoch.unwrap_or(-1),
                log_start_offset: -1,
                partition_max_bytes: self.config.max_partition_fetch_bytes,
                ..Default::default()
            };
            match topics.iter_mut().find(|t| t.topic == tp.topic) {
                Some(topic) => topic.partitions.push(partition),
                None => topics.push(fetch_request::FetchTopic {
                    topic: tp.topic.clone(),
                    partitions: vec![partition],
                    ..Default::default()
                }),
            }
        }
        Request::Fetch(fetch_request::FetchRequest {
            replica_id: -1,
            max_wait_ms,
            min_bytes: self.config.fetch_min_bytes,
            max_bytes: self.config.fetch_max_bytes,
            isolation_level: 0,
            // Sessionless full fetches (session id 0, epoch -1).
            session_id: 0,
            session_epoch: -1,
            topics,
            ..Default::default()
        })
    }

    /// Applies one partition's answer. Returns whether it was a transient problem.
    pub(super) fn handle_partition_data(
        &mut self,
        tp: &TopicPartition,
        position: FetchPosition,
        data: fetch_response::PartitionData,
        records: &mut Vec<ConsumerRecord>,
    ) -> Result<bool, ConsumerError> {
        let policy = self.config.auto_offset_reset;
        let error = ErrorCode::from_code(data.error_code).unwrap_or(ErrorCode::UnknownServerError);
        let state = self.state_mut(tp)?;
        if state.position != Some(position) {
            // Moved by something else meanwhile (cannot happen single-threaded; be safe).
            return Ok(false);
        }
        match error {
            ErrorCode::None => {}
            ErrorCode::FencedLeaderEpoch => {
                // Our leader epoch is older than the leader's: the leader changed under us.
                if position.offset_epoch.is_some() {
                    state.validation = Validation::Awaiting { nearest: false };
                }
                self.metadata_stale = true;
                return Ok(true);
            }
            ErrorCode::UnknownLeaderEpoch
            | ErrorCode::NotLeaderOrFollower
            | ErrorCode::LeaderNotAvailable
            | ErrorCode::UnknownTopicOrPartition
            | ErrorCode::ReplicaNotAvailable
            | ErrorCode::OffsetNotAvailable
            | ErrorCode::KafkaStorageError => {
                self.metadata_stale = true;
                return Ok(true);
            }
            ErrorCode::OffsetOutOfRange => {
                if policy == OffsetReset::None {
                    return Err(ConsumerError::OffsetOutOfRange {
                        partition: tp.clone(),
                        offset: position.offset,
                    });
                }
                state.position = None;
                return Ok(false);
            }
            other => {
                return Err(ConsumerError::Partition {
                    partition: tp.clone(),
                    error: other,
                });
            }
        }
        let diverging = &data.diverging_epoch;
        if diverging.epoch >= 0 || diverging.end_offset >= 0 {
            // KIP-320 via KIP-595's DivergingEpoch: the leader's log does not hold our
            // position in our offset epoch. Confirm and locate with OffsetForLeaderEpoch.
            tracing::debug!(partition = %tp, ?position, ?diverging, "diverging epoch");
            state.validation = Validation::Awaiting { nearest: false };
            return Ok(false);
        }
        state.high_watermark = Some(data.high_watermark);
        let bytes = match &data.records {
            Some(Records::Bytes(bytes)) => bytes.clone(),
            _ => Bytes::new(),
        };
        let mut next = position;
        for batch in BatchIter::new(bytes) {
            let batch = match batch {
                Ok(batch) => batch,
                // A partial batch at the end of a size-limited answer: fetch it next time.
                Err(error) if error.is_truncated() => break,
                Err(source) => {
                    return Err(ConsumerError::Records {
                        partition: tp.clone(),
                        offset: next.offset,
                        source,
                    });
                }
            };
            if batch.next_offset() <= next.offset {
                continue;
            }
            let epoch = batch.partition_leader_epoch();
            if !batch.is_control() {
                let to_error = |source| ConsumerError::Records {
                    partition: tp.clone(),
                    offset: batch.base_offset(),
                    source,
                };
                for record in batch.records().map_err(to_error)? {
                    let record = record.map_err(to_error)?;
                    if record.offset() < next.offset {
                        continue;
                    }
                    records.push(ConsumerRecord {
                        partition: tp.clone(),
                        offset: record.offset(),
                        leader_epoch: epoch,
                        timestamp: record.timestamp(),
                        key: record.key().cloned(),
                        value: record.value().cloned(),
                    });
                }
            }
            next = FetchPosition {
                offset: batch.next_offset(),
                offset_epoch: Some(epoch),
            };
        }
        let state = self.state_mut(tp)?;
        state.position = Some(next);
        Ok(false)
    }
}
