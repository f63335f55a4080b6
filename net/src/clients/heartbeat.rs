//! The group member's heartbeat thread (Kafka's Java consumer's `AbstractCoordinator`
//! `HeartbeatThread`): while the member holds an assignment, a thread of its own sends
//! Heartbeat every `heartbeat.interval.ms` on a connection of its own, so a record handler
//! that runs longer than `session.timeout.ms` between two `poll`s does not lose the member its
//! partitions. What bounds the time between polls is `max.poll.interval.ms` (the rebalance
//! timeout the member joined with): past it the thread stops heartbeating and leaves the
//! group (LeaveGroup, as Kafka's does, so the others take the partitions at once), and the
//! next `poll` joins again.
//!
//! The thread only reports; the poll loop acts ([`HeartbeatEvent`], taken by
//! [`HeartbeatThread::take_event`]), since committing before a rebalance, rejoining and
//! finding the coordinator are the member's:
//!
//! | Heartbeat answer | the thread | the poll loop |
//! | --- | --- | --- |
//! | none | next one after `heartbeat.interval.ms` | - |
//! | REBALANCE_IN_PROGRESS | pauses | commits (auto commit), joins again |
//! | ILLEGAL_GENERATION, FENCED_INSTANCE_ID | pauses | joins again |
//! | UNKNOWN_MEMBER_ID | pauses | forgets the member id, joins again |
//! | NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE | pauses | finds the coordinator, joins again |
//! | COORDINATOR_LOAD_IN_PROGRESS, a lost connection | tries again after `retry.backoff.ms`; the session ends if that lasts longer than `session.timeout.ms`, and the next answer says so | - |
//! | any other error | pauses | returns it ([`super::consumer::ConsumerError::Group`]) |
//! | no `poll` for `max.poll.interval.ms` | LeaveGroup, pauses | joins again with a new member id |
//!
//! Between a pause and the next assignment the thread sends nothing: a member whose JoinGroup
//! is parked at the coordinator is kept alive by it.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::group::{HEARTBEAT_VERSION, LEAVE_GROUP_VERSION};
use super::transport::{Target, Transport};
use crate::protocol::{ErrorCode, Request, Response, heartbeat_request, leave_group_request};

/// The generation the thread keeps alive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// The coordinator's node id and `host:port`.
    pub coordinator: (i32, String),
}

/// What the thread learned, for the poll loop to act on (module doc's table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeartbeatEvent {
    /// The group rebalances: commit, then join again.
    Rebalance,
    /// The generation is over for this member; `forget_member_id` for UNKNOWN_MEMBER_ID.
    Rejoin { forget_member_id: bool },
    /// Find the coordinator again.
    CoordinatorLost,
    /// No `poll` for `max.poll.interval.ms`: the thread left the group.
    PollIntervalExceeded,
    /// An error the member cannot handle.
    Fatal(ErrorCode),
}

/// The settings the thread runs by.
#[derive(Clone, Copy, Debug)]
pub struct HeartbeatTiming {
    pub heartbeat_interval: Duration,
    pub max_poll_interval: Duration,
    pub retry_backoff: Duration,
}

struct Shared {
    session: Option<Session>,
    last_poll: Instant,
    event: Option<HeartbeatEvent>,
    closing: bool,
}

pub struct HeartbeatThread {
    shared: Arc<(Mutex<Shared>, Condvar)>,
    handle: Option<JoinHandle<()>>,
}

impl HeartbeatThread {
    /// Starts the thread (idle until [`HeartbeatThread::start_session`]).
    pub fn spawn(
        transport: Box<dyn Transport + Send>,
        timing: HeartbeatTiming,
    ) -> std::io::Result<HeartbeatThread> {
        let shared = Arc::new((
            Mutex::new(Shared {
                session: None,
                last_poll: Instant::now(),
                event: None,
                closing: false,
            }),
            Condvar::new(),
        ));
        let thread_shared = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("group-heartbeat".into())
            .spawn(move || run(&thread_shared, transport, timing))?;
        Ok(HeartbeatThread {
            shared,
            handle: Some(handle),
        })
    }

    /// The member holds an assignment of `session`'s generation: heartbeat it, from a full
    /// interval from now (the SyncGroup that handed it out counts as one). An event of an
    /// earlier generation is dropped.
    pub fn start_session(&self, session: Session) {
        let mut shared = self.lock();
        shared.session = Some(session);
        shared.event = None;
        shared.last_poll = Instant::now();
        self.shared.1.notify_all();
    }

    /// The member is between generations (joining, leaving): no heartbeats.
    pub fn pause(&self) {
        self.lock().session = None;
        self.shared.1.notify_all();
    }

    /// The member polled: `max.poll.interval.ms` counts from now.
    pub fn polled(&self) {
        self.lock().last_poll = Instant::now();
    }

    /// What the thread learned since the last call, if anything.
    pub fn take_event(&self) -> Option<HeartbeatEvent> {
        self.lock().event.take()
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        // The thread never panics while holding the lock (it holds it for field updates only).
        self.shared.0.lock().expect("heartbeat state lock")
    }
}

impl Drop for HeartbeatThread {
    fn drop(&mut self) {
        {
            let mut shared = self.lock();
            shared.closing = true;
            shared.session = None;
        }
        self.shared.1.notify_all();
        if let Some(handle) = self.handle.take() {
            // A heartbeat in flight ends within its connection's timeout.
            let _ = handle.join();
        }
    }
}

/// The thread: waits for a session, heartbeats it every interval while the member polls.
fn run(
    shared: &(Mutex<Shared>, Condvar),
    mut transport: Box<dyn Transport + Send>,
    timing: HeartbeatTiming,
) {
    let (lock, condvar) = shared;
    let mut next_heartbeat = Instant::now() + timing.heartbeat_interval;
    let mut current: Option<Session> = None;
    let mut state = lock.lock().expect("heartbeat state lock");
    loop {
        if state.closing {
            return;
        }
        let Some(session) = state.session.clone() else {
            current = None;
            state = condvar.wait(state).expect("heartbeat state lock");
            continue;
        };
        if current.as_ref() != Some(&session) {
            // A new generation: its SyncGroup was the latest word with the coordinator.
            next_heartbeat = Instant::now() + timing.heartbeat_interval;
            transport.set_brokers(vec![session.coordinator.clone()]);
            current = Some(session.clone());
        }
        let now = Instant::now();
        if now.duration_since(state.last_poll) > timing.max_poll_interval {
            state.session = None;
            state.event = Some(HeartbeatEvent::PollIntervalExceeded);
            drop(state);
            tracing::warn!(
                group = %session.group_id, member = %session.member_id,
                max_poll_interval_ms = timing.max_poll_interval.as_millis() as u64,
                "no poll within max.poll.interval.ms: leaving the group"
            );
            leave_group(transport.as_mut(), &session);
            state = lock.lock().expect("heartbeat state lock");
            continue;
        }
        if now < next_heartbeat {
            let poll_deadline = state.last_poll + timing.max_poll_interval;
            let wake = next_heartbeat.min(poll_deadline + Duration::from_millis(1));
            state = condvar
                .wait_timeout(state, wake.saturating_duration_since(now))
                .expect("heartbeat state lock")
                .0;
            continue;
        }
        drop(state);
        let outcome = heartbeat(transport.as_mut(), &session);
        state = lock.lock().expect("heartbeat state lock");
        if state.session.as_ref() != Some(&session) {
            // The member moved on meanwhile: this answer is about a generation it left.
            continue;
        }
        match outcome {
            Ok(()) => next_heartbeat = Instant::now() + timing.heartbeat_interval,
            Err(Some(event)) => {
                tracing::info!(group = %session.group_id, ?event, "heartbeat: the member must act");
                state.session = None;
                state.event = Some(event);
            }
            Err(None) => next_heartbeat = Instant::now() + timing.retry_backoff,
        }
    }
}

/// One Heartbeat. `Err(None)`: try again after the backoff; `Err(Some)`: the poll loop acts.
fn heartbeat(
    transport: &mut (dyn Transport + Send),
    session: &Session,
) -> Result<(), Option<HeartbeatEvent>> {
    let request = Request::Heartbeat(heartbeat_request::HeartbeatRequest {
        group_id: session.group_id.clone(),
        generation_id: session.generation_id,
        member_id: session.member_id.clone(),
        group_instance_id: session.group_instance_id.clone(),
    });
    let response = match transport.request(
        Target::Node(session.coordinator.0),
        &request,
        HEARTBEAT_VERSION,
    ) {
        Ok(Response::Heartbeat(response)) => response,
        Ok(_) => return Err(None),
        Err(error) => {
            tracing::debug!(group = %session.group_id, %error, "heartbeat failed; trying again");
            return Err(None);
        }
    };
    let error = ErrorCode::from_code(response.error_code).unwrap_or(ErrorCode::UnknownServerError);
    Err(Some(match error {
        ErrorCode::None => return Ok(()),
        ErrorCode::CoordinatorLoadInProgress | ErrorCode::RequestTimedOut => return Err(None),
        ErrorCode::RebalanceInProgress => HeartbeatEvent::Rebalance,
        ErrorCode::IllegalGeneration | ErrorCode::FencedInstanceId => HeartbeatEvent::Rejoin {
            forget_member_id: false,
        },
        ErrorCode::UnknownMemberId => HeartbeatEvent::Rejoin {
            forget_member_id: true,
        },
        ErrorCode::NotCoordinator | ErrorCode::CoordinatorNotAvailable => {
            HeartbeatEvent::CoordinatorLost
        }
        other => HeartbeatEvent::Fatal(other),
    }))
}

/// LeaveGroup for a dynamic member past `max.poll.interval.ms` (a static member keeps its
/// place, KIP-345; its session timeout decides). The answer is not needed: a member the
/// coordinator already dropped is gone either way.
fn leave_group(transport: &mut (dyn Transport + Send), session: &Session) {
    if session.group_instance_id.is_some() {
        return;
    }
    let request = Request::LeaveGroup(leave_group_request::LeaveGroupRequest {
        group_id: session.group_id.clone(),
        members: vec![leave_group_request::MemberIdentity {
            member_id: session.member_id.clone(),
            group_instance_id: None,
            reason: Some("consumer poll timeout has expired (max.poll.interval.ms)".to_string()),
        }],
        ..Default::default()
    });
    if let Err(error) = transport.request(
        Target::Node(session.coordinator.0),
        &request,
        LEAVE_GROUP_VERSION,
    ) {
        tracing::debug!(group = %session.group_id, %error, "LeaveGroup failed");
    }
}

#[cfg(test)]
mod tests {
    //! The thread against an in-process coordinator that answers Heartbeat with the error the
    //! test sets and records every request.

    use super::*;
    use crate::client::ClientError;
    use crate::protocol::heartbeat_response;

    #[derive(Default)]
    struct Coordinator {
        /// The error code Heartbeat answers.
        heartbeat_error: i16,
        heartbeats: usize,
        leaves: Vec<String>,
    }

    struct FakeTransport(Arc<Mutex<Coordinator>>);

    impl Transport for FakeTransport {
        fn request(
            &mut self,
            _target: Target,
            request: &Request,
            _version: i16,
        ) -> Result<Response, ClientError> {
            let mut coordinator = self.0.lock().unwrap();
            match request {
                Request::Heartbeat(_) => {
                    coordinator.heartbeats += 1;
                    Ok(Response::Heartbeat(heartbeat_response::HeartbeatResponse {
                        error_code: coordinator.heartbeat_error,
                        ..Default::default()
                    }))
                }
                Request::LeaveGroup(leave) => {
                    coordinator
                        .leaves
                        .extend(leave.members.iter().map(|m| m.member_id.clone()));
                    Ok(Response::LeaveGroup(Default::default()))
                }
                other => Err(ClientError::Protocol(format!("unexpected {other:?}"))),
            }
        }

        fn send(&mut self, _: Target, _: &Request, _: i16) -> Result<(), ClientError> {
            Ok(())
        }

        fn set_brokers(&mut self, _: Vec<(i32, String)>) {}
    }

    fn session() -> Session {
        Session {
            group_id: "g".into(),
            generation_id: 3,
            member_id: "m-1".into(),
            group_instance_id: None,
            coordinator: (1, "127.0.0.1:1".into()),
        }
    }

    fn start(max_poll_interval_ms: u64) -> (HeartbeatThread, Arc<Mutex<Coordinator>>) {
        let coordinator = Arc::new(Mutex::new(Coordinator::default()));
        let thread = HeartbeatThread::spawn(
            Box::new(FakeTransport(Arc::clone(&coordinator))),
            HeartbeatTiming {
                heartbeat_interval: Duration::from_millis(10),
                max_poll_interval: Duration::from_millis(max_poll_interval_ms),
                retry_backoff: Duration::from_millis(10),
            },
        )
        .unwrap();
        (thread, coordinator)
    }

    /// Polls `probe` until it holds, for at most ten seconds.
    fn eventually(what: &str, mut probe: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !probe() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::yield_now();
        }
    }

    #[test]
    fn the_thread_heartbeats_while_the_member_does_not_poll_and_only_in_a_session() {
        let (thread, coordinator) = start(600_000);
        thread.start_session(session());
        // No poll at all: the session is kept by the thread alone.
        eventually("five heartbeats", || {
            coordinator.lock().unwrap().heartbeats >= 5
        });
        assert_eq!(thread.take_event(), None);
        // Paused (the member rejoins): no more heartbeats.
        thread.pause();
        let paused_at = {
            // A heartbeat in flight when the pause came may still land.
            let before = coordinator.lock().unwrap().heartbeats;
            eventually("the thread to see the pause", || {
                thread.lock().session.is_none()
            });
            before + 1
        };
        let until = Instant::now() + Duration::from_millis(100);
        while Instant::now() < until {
            assert!(coordinator.lock().unwrap().heartbeats <= paused_at);
            std::thread::yield_now();
        }
    }

    #[test]
    fn answers_become_events_for_the_poll_loop() {
        let cases = [
            (ErrorCode::RebalanceInProgress, HeartbeatEvent::Rebalance),
            (
                ErrorCode::IllegalGeneration,
                HeartbeatEvent::Rejoin {
                    forget_member_id: false,
                },
            ),
            (
                ErrorCode::UnknownMemberId,
                HeartbeatEvent::Rejoin {
                    forget_member_id: true,
                },
            ),
            (ErrorCode::NotCoordinator, HeartbeatEvent::CoordinatorLost),
            (
                ErrorCode::GroupAuthorizationFailed,
                HeartbeatEvent::Fatal(ErrorCode::GroupAuthorizationFailed),
            ),
        ];
        for (error, expected) in cases {
            let (thread, coordinator) = start(600_000);
            coordinator.lock().unwrap().heartbeat_error = error.code();
            thread.start_session(session());
            let mut event = None;
            eventually(&format!("the event of {error:?}"), || {
                event = thread.take_event();
                event.is_some()
            });
            assert_eq!(event, Some(expected), "{error:?}");
            // The thread paused itself: it waits for the member's next generation.
            assert!(thread.lock().session.is_none());
        }
    }

    /// Kafka's `max.poll.interval.ms`: a member that stops polling loses its place, by a
    /// LeaveGroup from the thread, and the poll loop learns it.
    #[test]
    fn no_poll_for_max_poll_interval_leaves_the_group() {
        let (thread, coordinator) = start(50);
        thread.start_session(session());
        let mut event = None;
        eventually("the poll interval to pass", || {
            event = thread.take_event();
            event.is_some()
        });
        assert_eq!(event, Some(HeartbeatEvent::PollIntervalExceeded));
        eventually("the LeaveGroup", || {
            coordinator.lock().unwrap().leaves == ["m-1"]
        });
    }

    #[test]
    fn polling_keeps_the_member_past_max_poll_interval() {
        let (thread, coordinator) = start(200);
        thread.start_session(session());
        let until = Instant::now() + Duration::from_millis(600);
        while Instant::now() < until {
            thread.polled();
            std::thread::yield_now();
        }
        assert_eq!(thread.take_event(), None);
        assert!(coordinator.lock().unwrap().leaves.is_empty());
        assert!(coordinator.lock().unwrap().heartbeats >= 2);
    }
}
