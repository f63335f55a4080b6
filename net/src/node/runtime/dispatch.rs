//! The client requests: each is handed to the API that serves it (a type of its own in its own
//! file, called with a `Cx`), after the authorization that refuses a request whole.

use super::super::*;

impl Node {
    /// A client request: refused whole when its one resource is not authorized (authorize.rs),
    /// else handed to the API that serves it (each in its own file, taking a `Cx`).
    pub(in crate::node) fn handle_client_request(
        &mut self,
        responder: Responder,
        header: RequestHeader,
        request: Request,
    ) -> Result<(), NodeError> {
        let version = header.api_version;
        // With an authorizer, nothing is authorized before the ACL image is loaded (acls.rs,
        // `AclImage::loaded`): the connection is closed unanswered (a Kafka broker does not serve
        // before its authorizer's initial load either) and the client reconnects and retries.
        if self.config.authorizer.settings.is_some()
            && !matches!(request, Request::ApiVersions(_))
            && responder.listener() != ListenerRole::Controller
            && !self
                .handlers
                .acl_image
                .loaded(context::metadata_raft(&self.host, &self.table))
        {
            tracing::debug!(api = ?request.api_key(), "ACL image not loaded yet; connection closed");
            return Ok(());
        }
        // The requests whose one resource the requester may not touch stop here (authorize.rs).
        let requester = responder.requester();
        if let Some(refused) = self.authorizer().refuse_unauthorized(&requester, &request) {
            let frame = encode_response(header.correlation_id, version, &refused)?;
            responder.send(Some(frame));
            return Ok(());
        }
        let response = match request {
            Request::InitProducerId(r) => {
                let response = idempotence::handle_init_producer_id(&r, || {
                    let mut cx = cx!(self);
                    self.handlers
                        .producer_ids
                        .claim_producer_id(&mut cx, &mut self.handlers.producer_id_control)
                });
                // It may have asked for a producer id block (producer_ids.rs).
                self.after_call()?;
                Response::InitProducerId(response)
            }
            Request::ApiVersions(_) => Response::ApiVersions(ApiVersionsResponse {
                error_code: 0,
                api_keys: served_api_versions(responder.listener()),
                ..Default::default()
            }),
            Request::Metadata(r) => {
                let mut cx = cx!(self);
                metadata::answer_metadata(
                    &mut cx,
                    &mut self.handlers.topics,
                    &self.offline,
                    &mut self.remote_leaders,
                    responder,
                    &header,
                    r,
                )?;
                return self.after_call();
            }
            Request::ListOffsets(r) => {
                let lookup = PartitionLookup {
                    topics: &self.handlers.topics,
                    offline: &self.offline,
                };
                let response =
                    metadata::handle_list_offsets(&mut cx!(self), lookup, &r, &requester);
                Response::ListOffsets(response)
            }
            Request::OffsetForLeaderEpoch(r) => {
                let lookup = PartitionLookup {
                    topics: &self.handlers.topics,
                    offline: &self.offline,
                };
                let response = metadata::handle_offset_for_leader_epoch(&cx!(self), lookup, &r);
                Response::OffsetForLeaderEpoch(response)
            }
            Request::DescribeQuorum(r) => {
                Response::DescribeQuorum(describe_quorum(&cx!(self), self.started_wall_ms, &r))
            }
            Request::Produce(r) => {
                let message_max_bytes = self
                    .handlers
                    .broker_configs
                    .message_max_bytes(&self.config)
                    .0;
                let mut call = self.handlers.produces.begin(responder, &header, r);
                // Each append's output is delivered before the next partition is looked at,
                // and before any answer.
                loop {
                    let mut cx = cx!(self);
                    let mut env = ProduceEnv {
                        producers: &mut self.handlers.producers,
                        stall: &mut self.stall,
                        lookup: PartitionLookup {
                            topics: &self.handlers.topics,
                            offline: &self.offline,
                        },
                        message_max_bytes,
                        shutting_down: self.shutdown_until_ms.is_some(),
                    };
                    if !call.next_partition(&mut cx, &mut env) {
                        break;
                    }
                    let delivered = self.deliver();
                    call.delivered(delivered);
                }
                let now = self.now_ms();
                let Some(id) = self.handlers.produces.finish(call, now) else {
                    return Ok(());
                };
                self.check_waiters()?;
                return self.handlers.produces.maybe_complete(&cx!(self), id);
            }
            Request::CreateTopics(r) => {
                let mut cx = cx!(self);
                self.handlers
                    .topics
                    .handle_create_topics(&mut cx, responder, &header, r)?;
                return self.after_call();
            }
            Request::DeleteTopics(r) => {
                let mut cx = cx!(self);
                self.handlers
                    .topics
                    .handle_delete_topics(&mut cx, responder, &header, r)?;
                return self.after_call();
            }
            Request::DescribeConfigs(r) => {
                Response::DescribeConfigs(configs::handle_describe_configs(
                    &cx!(self),
                    &self.handlers.topics,
                    &self.handlers.broker_configs,
                    &r,
                    &requester,
                ))
            }
            Request::IncrementalAlterConfigs(r) => {
                let mut cx = cx!(self);
                configs::handle_incremental_alter_configs(
                    &mut cx,
                    &mut self.handlers.topics,
                    &mut self.handlers.broker_configs,
                    responder,
                    &header,
                    r,
                )?;
                return self.after_call();
            }
            Request::AlterConfigs(r) => {
                let mut cx = cx!(self);
                configs::handle_alter_configs(
                    &mut cx,
                    &mut self.handlers.topics,
                    &mut self.handlers.broker_configs,
                    responder,
                    &header,
                    r,
                )?;
                return self.after_call();
            }
            Request::CreatePartitions(r) => {
                let mut cx = cx!(self);
                self.handlers
                    .topics
                    .handle_create_partitions(&mut cx, responder, &header, r)?;
                return self.after_call();
            }
            Request::DeleteRecords(r) => return self.handle_delete_records(responder, &header, r),
            Request::DescribeAcls(r) => {
                Response::DescribeAcls(acls::AclState::handle_describe_acls(&cx!(self), &r))
            }
            Request::CreateAcls(r) => {
                let mut cx = cx!(self);
                self.handlers
                    .acls
                    .handle_create_acls(&mut cx, responder, &header, r)?;
                return self.after_call();
            }
            Request::DeleteAcls(r) => {
                let mut cx = cx!(self);
                self.handlers
                    .acls
                    .handle_delete_acls(&mut cx, responder, &header, r)?;
                return self.after_call();
            }
            Request::DescribeCluster(r) => {
                let brokers = metadata::metadata_brokers(&self.config, self.metadata_raft());
                Response::DescribeCluster(describe_cluster::handle_describe_cluster(
                    &cx!(self),
                    &r,
                    &requester,
                    brokers,
                ))
            }
            Request::AllocateProducerIds(r) => {
                let mut cx = cx!(self);
                self.handlers
                    .producer_id_control
                    .handle_allocate_producer_ids(
                        &mut cx,
                        &mut self.handlers.producer_ids,
                        responder,
                        &header,
                        &r,
                    )?;
                return self.after_call();
            }
            Request::Fetch(r) => {
                let lookup = PartitionLookup {
                    topics: &self.handlers.topics,
                    offline: &self.offline,
                };
                let shutting_down = self.shutdown_until_ms.is_some();
                let mut cx = cx!(self);
                return self.handlers.fetches.consumer_fetch(
                    &mut cx,
                    lookup,
                    shutting_down,
                    responder,
                    &header,
                    r,
                    true,
                );
            }
            r @ (Request::AddRaftVoter(_)
            | Request::RemoveRaftVoter(_)
            | Request::UpdateRaftVoter(_)) => {
                let mut cx = cx!(self);
                self.handlers
                    .voter_changes
                    .handle(&mut cx, responder, &header, r)?;
                return self.after_call();
            }
            Request::DescribeUserScramCredentials(r) => Response::DescribeUserScramCredentials(
                self.handlers
                    .credentials
                    .handle_describe_user_scram_credentials(&r),
            ),
            Request::AlterUserScramCredentials(r) => {
                let mut cx = cx!(self);
                self.handlers
                    .credentials
                    .handle_alter_user_scram_credentials(&mut cx, responder, &header, r)?;
                return self.after_call();
            }
            r @ (Request::SaslHandshake(_) | Request::SaslAuthenticate(_)) => {
                scram::sasl_request_outside_the_exchange(&r)
            }
            r if groups::is_group_request(&r) => {
                let brokers = match r {
                    Request::FindCoordinator(_) => {
                        metadata::metadata_brokers(&self.config, self.metadata_raft())
                    }
                    _ => Vec::new(),
                };
                let env = groups::GroupsEnv {
                    topics: &self.handlers.topics,
                    message_max_bytes: self
                        .handlers
                        .broker_configs
                        .message_max_bytes(&self.config)
                        .0,
                };
                let mut cx = cx!(self);
                let call = self
                    .handlers
                    .groups
                    .handle_request(&mut cx, env, brokers, responder, header, r);
                if self.handlers.groups.take_offsets_topic_wanted()
                    && let Err(code) = self.handlers.topics.propose_offsets_topic(&mut cx!(self))
                {
                    tracing::info!(?code, "__consumer_offsets not proposed yet");
                }
                let after = self.after_call();
                return call.and(after);
            }
            other => {
                // Not served by this node yet: an empty answer keeps the connection in step.
                tracing::debug!(api = ?other.api_key(), "request not served; empty answer");
                match other {
                    Request::FetchSnapshot(_) => Response::FetchSnapshot(Default::default()),
                    _ => return Ok(()),
                }
            }
        };
        let frame = encode_response(header.correlation_id, version, &response)?;
        responder.send(Some(frame));
        Ok(())
    }
}
