//! The group member's requests to its coordinator: finding it, sending a request there, and
//! what each error code means for the member (retry, rejoin, or fail).

use super::*;

impl<T: Transport> GroupConsumer<T> {
    /// What an error of a group request means for this member; `None`: fatal. Updates the
    /// member's state (forgets the coordinator or the member id, leaves the generation).
    pub(super) fn classify(&mut self, error: ErrorCode) -> Option<Retry> {
        match error {
            ErrorCode::NotCoordinator | ErrorCode::CoordinatorNotAvailable => {
                self.coordinator = None;
                Some(Retry::Rediscover)
            }
            ErrorCode::CoordinatorLoadInProgress | ErrorCode::RequestTimedOut => {
                Some(Retry::Backoff)
            }
            ErrorCode::UnknownMemberId => {
                self.member_id.clear();
                self.membership = Membership::Unjoined;
                Some(Retry::Rejoin)
            }
            ErrorCode::IllegalGeneration | ErrorCode::RebalanceInProgress => {
                self.membership = Membership::Unjoined;
                Some(Retry::Rejoin)
            }
            _ => None,
        }
    }

    /// Waits before the next attempt, or gives up at `deadline`.
    pub(super) fn retry(
        &mut self,
        retry: Retry,
        api: &str,
        error: ErrorCode,
        deadline: Instant,
    ) -> Result<(), ConsumerError> {
        if Instant::now() >= deadline {
            return Err(ConsumerError::Timeout(format!(
                "{api} of group {}: {error}",
                self.config.group_id
            )));
        }
        if matches!(retry, Retry::Backoff | Retry::Rediscover) {
            self.consumer.backoff(deadline);
        }
        Ok(())
    }

    pub(super) fn group_error(&self, api: &'static str, error: ErrorCode) -> ConsumerError {
        ConsumerError::Group {
            group_id: self.config.group_id.clone(),
            api,
            error,
        }
    }

    /// Sends `request` to the coordinator, finding it first; a lost connection forgets the
    /// coordinator and asks again until `deadline`.
    pub(super) fn coordinator_request(
        &mut self,
        request: &Request,
        version: i16,
        deadline: Instant,
    ) -> Result<Response, ConsumerError> {
        loop {
            let coordinator = match &self.coordinator {
                Some((node, _)) => *node,
                None => match self.find_coordinator()? {
                    Ok(node) => node,
                    Err(error) => {
                        self.retry(Retry::Backoff, "FindCoordinator", error, deadline)?;
                        continue;
                    }
                },
            };
            match self
                .coordinator_transport
                .request(Target::Node(coordinator), request, version)
            {
                Ok(response) => return Ok(response),
                Err(error) => {
                    tracing::debug!(coordinator, %error, "coordinator request failed");
                    self.coordinator = None;
                    if Instant::now() >= deadline {
                        return Err(error.into());
                    }
                    self.consumer.backoff(deadline);
                }
            }
        }
    }

    /// FindCoordinator (v3, key type 0) at any node. `Ok(Err(code))`: retriable answer.
    pub(super) fn find_coordinator(&mut self) -> Result<Result<i32, ErrorCode>, ConsumerError> {
        let request = Request::FindCoordinator(find_coordinator_request::FindCoordinatorRequest {
            key: self.config.group_id.clone(),
            key_type: 0,
            ..Default::default()
        });
        let response = match self.consumer.transport_mut().request(
            Target::Any,
            &request,
            FIND_COORDINATOR_VERSION,
        ) {
            Ok(response) => response,
            Err(error) => {
                self.consumer.log_trouble("FindCoordinator", &error);
                return Ok(Err(ErrorCode::CoordinatorNotAvailable));
            }
        };
        let Response::FindCoordinator(response) = response else {
            return Err(ClientError::Protocol("not a FindCoordinator answer".into()).into());
        };
        let error =
            ErrorCode::from_code(response.error_code).unwrap_or(ErrorCode::UnknownServerError);
        match error {
            ErrorCode::None => {
                let coordinator = (
                    response.node_id,
                    format!("{}:{}", response.host, response.port),
                );
                self.coordinator_transport
                    .set_brokers(vec![coordinator.clone()]);
                self.coordinator = Some(coordinator);
                Ok(Ok(response.node_id))
            }
            ErrorCode::CoordinatorNotAvailable
            | ErrorCode::CoordinatorLoadInProgress
            | ErrorCode::NotCoordinator => Ok(Err(error)),
            other => Err(self.group_error("FindCoordinator", other)),
        }
    }
}
