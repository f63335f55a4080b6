//! One client connection's request/response bookkeeping, without sockets: the part every
//! Kafka client of ringlog shares (the blocking [`super::Client`] of the CLI, `perf`, the Rust
//! consumer and producer and the tests; the node's asynchronous peer lanes).
//!
//! - Requests are framed with a request header (correlation ids increase from 1) or, for a
//!   frame encoded elsewhere, registered with [`Exchange::expect`].
//! - Responses are split off the receive buffer with a bound (`max_frame_bytes`, checked on the
//!   4-byte size before any room is reserved for the body) and must answer the *oldest* request
//!   in flight: a Kafka broker answers one connection's requests in order, so anything else is
//!   a stream out of step and ends the connection.
//! - The ApiVersions handshake ([`Exchange::handshake_request`] / [`Exchange::on_api_versions`])
//!   learns the versions the broker speaks; [`Exchange::encode`] then refuses a version the
//!   broker does not, with a typed error, instead of sending bytes the broker would close the
//!   connection on.

use std::collections::{HashMap, VecDeque};

use bytes::{Bytes, BytesMut};

use super::ClientError;
use crate::protocol::{
    ApiKey, Request, RequestHeader, Response, api_versions_request, decode_response,
    encode_request, split_frame,
};

/// The ApiVersions version the handshake sends (flexible, KIP-511's client software fields).
pub const API_VERSIONS_VERSION: i16 = 3;

/// The least room a read is given.
const MIN_READ_ROOM_BYTES: usize = 64 * 1024;
/// The most room reserved ahead of the bytes that arrived ([`Exchange::reserve_for_read`]).
const RESERVE_STEP_BYTES: usize = 8 * 1024 * 1024;

/// A connection's bookkeeping: correlation ids, requests in flight, the receive buffer and the
/// versions the broker advertised.
#[derive(Debug)]
pub struct Exchange {
    client_id: String,
    next_correlation_id: i32,
    in_flight: VecDeque<(i32, ApiKey, i16)>,
    max_frame_bytes: usize,
    received: BytesMut,
    /// api key → (min, max) version, once the handshake answered.
    broker_versions: Option<HashMap<i16, (i16, i16)>>,
}

impl Exchange {
    pub fn new(client_id: &str, max_frame_bytes: usize) -> Exchange {
        Exchange {
            client_id: client_id.to_string(),
            next_correlation_id: 1,
            in_flight: VecDeque::new(),
            max_frame_bytes,
            received: BytesMut::with_capacity(64 * 1024),
            broker_versions: None,
        }
    }

    /// Frames `request` at `version` and records it as in flight; returns its correlation id
    /// and the frame to write. A version outside what the broker advertised (after the
    /// handshake) is refused here. Correlation ids run from 1 (wrapping back to 1).
    pub fn encode(&mut self, request: &Request, version: i16) -> Result<(i32, Bytes), ClientError> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1).max(1);
        self.encode_as(correlation_id, request, version)
    }

    /// The ApiVersions request that opens a connection, framed under correlation id 0, which
    /// no other request of ours uses: the node numbers its peer requests itself from 1
    /// ([`Exchange::expect`]), and a reused id on one connection confuses readers that pair
    /// answers by id (Wireshark's Kafka dissector took a Vote answer for the handshake's).
    pub fn encode_handshake(&mut self) -> Result<(i32, Bytes), ClientError> {
        self.encode_as(0, &Exchange::handshake_request(), API_VERSIONS_VERSION)
    }

    fn encode_as(
        &mut self,
        correlation_id: i32,
        request: &Request,
        version: i16,
    ) -> Result<(i32, Bytes), ClientError> {
        let api = request.api_key();
        self.check_version(api, version)?;
        let header = RequestHeader {
            api_key: api.key(),
            api_version: version,
            correlation_id,
            client_id: Some(self.client_id.clone()),
        };
        let frame = encode_request(&header, request)?;
        self.in_flight.push_back((correlation_id, api, version));
        Ok((correlation_id, frame))
    }

    /// Records a request framed elsewhere (the node numbers its peer requests itself) as in
    /// flight, after the same version check as [`Exchange::encode`].
    pub fn expect(
        &mut self,
        correlation_id: i32,
        api: ApiKey,
        version: i16,
    ) -> Result<(), ClientError> {
        self.check_version(api, version)?;
        self.in_flight.push_back((correlation_id, api, version));
        Ok(())
    }

    /// Forgets the newest request recorded as in flight (its frame could not be written).
    pub fn unsend(&mut self, correlation_id: i32) {
        if self
            .in_flight
            .back()
            .is_some_and(|(id, _, _)| *id == correlation_id)
        {
            self.in_flight.pop_back();
        }
    }

    fn check_version(&self, api: ApiKey, version: i16) -> Result<(), ClientError> {
        let Some(versions) = &self.broker_versions else {
            return Ok(());
        };
        match versions.get(&api.key()) {
            Some(&(min, max)) if (min..=max).contains(&version) => Ok(()),
            range => Err(ClientError::UnsupportedVersion {
                api,
                version,
                broker: range.copied(),
            }),
        }
    }

    /// The receive buffer: read socket bytes into its spare room.
    pub fn received_mut(&mut self) -> &mut BytesMut {
        &mut self.received
    }

    /// The receive buffer with room for the next read: the rest of the frame at its front once
    /// the size prefix is known (at least 64 KiB, at most `RESERVE_STEP_BYTES` ahead of what
    /// arrived), so a large response is read into one allocation, one kernel-to-user copy per
    /// byte, instead of a buffer that grows 64 bytes at a time and copies what arrived so far
    /// at every doubling (7.6% of a node's CPU in `realloc` with 100 partitions, 2026-12-04).
    /// Memory still follows the bytes that arrive: a peer announcing a large frame and sending
    /// nothing holds at most one step.
    ///
    /// The room is also *at most* that, so a read never takes more than 64 KiB beyond the
    /// current frame: the head of a frame whose size was not known yet is all that may have to
    /// move when its room is made. Room is found without copying frames split off before: the
    /// allocation is reused once they are dropped (`try_reclaim`), else a new one receives only
    /// the bytes not yet framed. (`BytesMut::reserve` copies the whole old allocation, consumed
    /// frames included, and doubles it; a read into the leftover room of an old allocation
    /// copied a partial 5 MiB Fetch response when its room ran out: 2.7 % and then 9.6 % of a
    /// catching-up follower's CPU, 2026-12-04.)
    pub fn reserve_for_read(&mut self) -> &mut BytesMut {
        // What the read must have room for (the frame's rest, once its size is known), and the
        // most it may have (that, or 64 KiB to take the next frames' heads too).
        let (needed, room) = if self.received.len() >= 4 {
            let rest = self.wanted_bytes().min(RESERVE_STEP_BYTES);
            (rest, rest.max(MIN_READ_ROOM_BYTES))
        } else {
            (MIN_READ_ROOM_BYTES, MIN_READ_ROOM_BYTES)
        };
        let spare = self.received.capacity() - self.received.len();
        if spare < needed && !self.received.try_reclaim(room) {
            let mut fresh = BytesMut::with_capacity(self.received.len() + room);
            fresh.extend_from_slice(&self.received);
            self.received = fresh;
        }
        let end = self.received.len() + room;
        if self.received.capacity() > end {
            // The rest stays in the allocation: a later `try_reclaim` regains it once unique.
            drop(self.received.split_off(end));
        }
        &mut self.received
    }

    /// How many more bytes complete the frame at the front of the buffer (at least the 4-byte
    /// size): a reader sizes its next read with it. A size above `max_frame_bytes` asks for no
    /// more than the size prefix; [`Exchange::next_response`] then reports the error.
    pub fn wanted_bytes(&self) -> usize {
        match self.received.get(..4) {
            Some(size) => {
                let size = i32::from_be_bytes([size[0], size[1], size[2], size[3]]);
                let size = usize::try_from(size).unwrap_or(0).min(self.max_frame_bytes);
                (4 + size).saturating_sub(self.received.len())
            }
            None => 4 - self.received.len(),
        }
    }

    /// The next complete response, matched to the oldest request in flight and decoded, or
    /// `None` when more bytes are needed. An error means the connection is out of step (or the
    /// broker sent what it must not) and must be closed: [`Exchange::reset`].
    pub fn next_response(&mut self) -> Result<Option<(i32, Response)>, ClientError> {
        let Some(frame) = split_frame(&mut self.received, self.max_frame_bytes)? else {
            return Ok(None);
        };
        if frame.len() < 4 {
            return Err(ClientError::Protocol(format!(
                "a response frame of {} bytes",
                frame.len()
            )));
        }
        let correlation_id = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
        let Some((expected, api, version)) = self.in_flight.pop_front() else {
            return Err(ClientError::Protocol(format!(
                "answer to request {correlation_id}, none in flight"
            )));
        };
        if correlation_id != expected {
            return Err(ClientError::Protocol(format!(
                "answer to request {correlation_id} while waiting for {expected}"
            )));
        }
        let (_, response) = decode_response(api, version, frame)?;
        Ok(Some((correlation_id, response)))
    }

    /// Whether any request waits for its answer.
    pub fn has_in_flight(&self) -> bool {
        !self.in_flight.is_empty()
    }

    /// The connection is gone: the correlation ids that will never be answered, oldest first.
    /// Received bytes and the broker's versions are dropped (a new connection handshakes again).
    pub fn reset(&mut self) -> Vec<i32> {
        self.received.clear();
        self.broker_versions = None;
        self.in_flight.drain(..).map(|(id, _, _)| id).collect()
    }

    /// The ApiVersions request that opens a connection.
    pub fn handshake_request() -> Request {
        Request::ApiVersions(api_versions_request::ApiVersionsRequest {
            client_software_name: "ringlog".into(),
            client_software_version: env!("CARGO_PKG_VERSION").into(),
        })
    }

    /// Takes the handshake's answer: the versions the broker speaks, from now on checked by
    /// [`Exchange::encode`] and [`Exchange::expect`].
    pub fn on_api_versions(&mut self, response: Response) -> Result<(), ClientError> {
        let Response::ApiVersions(response) = response else {
            return Err(ClientError::Protocol(
                "the handshake's answer is not ApiVersions".into(),
            ));
        };
        if response.error_code != 0 {
            return Err(ClientError::Protocol(format!(
                "ApiVersions answered error code {}",
                response.error_code
            )));
        }
        self.broker_versions = Some(
            response
                .api_keys
                .iter()
                .map(|row| (row.api_key, (row.min_version, row.max_version)))
                .collect(),
        );
        Ok(())
    }

    /// The highest version of `api` both sides speak, after the handshake.
    pub fn max_common_version(&self, api: ApiKey) -> Option<i16> {
        let ours = api.versions();
        let &(min, max) = self.broker_versions.as_ref()?.get(&api.key())?;
        let high = max.min(ours.max);
        (high >= min.max(ours.min)).then_some(high)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{api_versions_response, encode_response};

    fn api_versions_answer(correlation_id: i32, rows: &[(ApiKey, i16, i16)]) -> Bytes {
        api_versions_answer_at(correlation_id, 0, rows)
    }

    fn api_versions_answer_at(
        correlation_id: i32,
        version: i16,
        rows: &[(ApiKey, i16, i16)],
    ) -> Bytes {
        let response = api_versions_response::ApiVersionsResponse {
            api_keys: rows
                .iter()
                .map(|&(api, min, max)| api_versions_response::ApiVersion {
                    api_key: api.key(),
                    min_version: min,
                    max_version: max,
                })
                .collect(),
            ..Default::default()
        };
        encode_response(correlation_id, version, &Response::ApiVersions(response)).unwrap()
    }

    fn handshake(exchange: &mut Exchange, rows: &[(ApiKey, i16, i16)]) {
        let (id, _) = exchange
            .encode_handshake()
            .expect("ApiVersions before any handshake");
        assert_eq!(id, 0, "the handshake's own correlation id");
        exchange
            .received_mut()
            .extend_from_slice(&api_versions_answer_at(id, API_VERSIONS_VERSION, rows));
        let (answered, response) = exchange.next_response().unwrap().expect("a whole frame");
        assert_eq!(answered, id);
        exchange.on_api_versions(response).unwrap();
    }

    /// A read is given room for the whole announced frame, so a large response lands in one
    /// allocation; a huge announcement reserves one step, not the frame.
    #[test]
    fn reads_get_room_for_the_announced_frame_up_to_one_step() {
        let spare = |exchange: &mut Exchange| {
            let buf = exchange.reserve_for_read();
            buf.capacity() - buf.len()
        };
        let mut exchange = Exchange::new("t", 256 << 20);
        assert!(spare(&mut exchange) >= MIN_READ_ROOM_BYTES);
        exchange
            .received_mut()
            .extend_from_slice(&(3_000_000i32).to_be_bytes());
        exchange.received_mut().extend_from_slice(&[0; 100]);
        assert!(spare(&mut exchange) >= 3_000_000 - 100);
        let mut exchange = Exchange::new("t", 256 << 20);
        exchange
            .received_mut()
            .extend_from_slice(&(200_000_000i32).to_be_bytes());
        let room = spare(&mut exchange);
        assert!(
            (RESERVE_STEP_BYTES..2 * RESERVE_STEP_BYTES).contains(&room),
            "{room} bytes reserved for a frame announced at 200 MB"
        );
    }

    /// Room for the next frame keeps the bytes not yet framed and leaves the frames split off
    /// before it intact, whether they are still held or dropped (then the allocation may be
    /// reused).
    #[test]
    fn room_for_the_next_frame_keeps_unframed_bytes_and_held_frames() {
        for hold in [true, false] {
            let mut exchange = Exchange::new("t", 256 << 20);
            let first = 1 << 20;
            let buf = exchange.received_mut();
            buf.extend_from_slice(&(first as i32).to_be_bytes());
            buf.extend_from_slice(&vec![7; first]);
            buf.extend_from_slice(&(5_000_000i32).to_be_bytes());
            buf.extend_from_slice(&[1, 2, 3, 4, 5, 6]);
            let frame = split_frame(&mut exchange.received, 256 << 20)
                .unwrap()
                .expect("a whole frame");
            let held = hold.then_some(frame);
            let buf = exchange.reserve_for_read();
            assert_eq!(
                buf.capacity() - buf.len(),
                5_000_000 - 6,
                "the frame's rest"
            );
            assert_eq!(&buf[..], &[0, 0x4c, 0x4b, 0x40, 1, 2, 3, 4, 5, 6]);
            if let Some(frame) = held {
                assert_eq!(frame.len(), first);
                assert!(frame.iter().all(|&b| b == 7));
            }
        }
    }

    /// A read never reaches more than 64 KiB past the frame at the front, however much room the
    /// allocation has: the head of a frame of unknown size is all that may have to move.
    #[test]
    fn a_read_takes_at_most_64_kib_beyond_the_current_frame() {
        let mut exchange = Exchange::new("t", 256 << 20);
        exchange.received = BytesMut::with_capacity(16 << 20);
        let buf = exchange.reserve_for_read();
        assert_eq!(buf.capacity() - buf.len(), MIN_READ_ROOM_BYTES);
        buf.extend_from_slice(&(1_000_000i32).to_be_bytes());
        buf.extend_from_slice(&[9; 1000]);
        // The rest of this frame, from the same allocation (no copy: its pointer stays).
        let before = exchange.received.as_ptr();
        let buf = exchange.reserve_for_read();
        assert_eq!(buf.capacity() - buf.len(), 1_000_000 - 1000);
        assert_eq!(buf.as_ptr(), before);
        // Its last bytes fit the room left: nothing moves (taking 64 KiB more of room used to
        // copy the whole partial frame into a new allocation).
        buf.extend_from_slice(&vec![9; 1_000_000 - 1000 - 500]);
        let buf = exchange.reserve_for_read();
        assert_eq!(buf.capacity() - buf.len(), 500);
        assert_eq!(buf.as_ptr(), before);
    }

    #[test]
    fn a_version_the_broker_does_not_speak_is_refused_before_sending() {
        let mut exchange = Exchange::new("t", 1 << 20);
        handshake(&mut exchange, &[(ApiKey::Metadata, 0, 9)]);
        let request = Request::Metadata(Default::default());
        assert!(matches!(
            exchange.encode(&request, 12),
            Err(ClientError::UnsupportedVersion {
                version: 12,
                broker: Some((0, 9)),
                ..
            })
        ));
        assert!(exchange.encode(&request, 9).is_ok());
        assert_eq!(exchange.max_common_version(ApiKey::Metadata), Some(9));
        assert!(matches!(
            exchange.expect(7, ApiKey::Fetch, 4),
            Err(ClientError::UnsupportedVersion { broker: None, .. })
        ));
    }

    #[test]
    fn an_answer_out_of_order_ends_the_exchange() {
        let mut exchange = Exchange::new("t", 1 << 20);
        let (first, _) = exchange.encode(&Exchange::handshake_request(), 0).unwrap();
        let (second, _) = exchange.encode(&Exchange::handshake_request(), 0).unwrap();
        exchange
            .received_mut()
            .extend_from_slice(&api_versions_answer(second, &[]));
        let error = exchange.next_response().unwrap_err();
        assert!(
            error.to_string().contains(&format!(
                "answer to request {second} while waiting for {first}"
            )),
            "{error}"
        );
        assert_eq!(exchange.reset(), vec![second]);
    }

    #[test]
    fn an_announced_frame_above_the_bound_is_refused_before_its_body() {
        let mut exchange = Exchange::new("t", 1024);
        exchange.encode(&Exchange::handshake_request(), 0).unwrap();
        exchange
            .received_mut()
            .extend_from_slice(&(100 * 1024 * 1024i32).to_be_bytes());
        assert_eq!(exchange.wanted_bytes(), 1024, "never more than the bound");
        assert!(exchange.next_response().is_err());
    }

    #[test]
    fn a_partial_frame_waits_for_its_bytes() {
        let mut exchange = Exchange::new("t", 1 << 20);
        let (id, _) = exchange.encode(&Exchange::handshake_request(), 0).unwrap();
        let answer = api_versions_answer(id, &[(ApiKey::Fetch, 0, 17)]);
        exchange.received_mut().extend_from_slice(&answer[..3]);
        assert_eq!(exchange.wanted_bytes(), 1);
        assert!(exchange.next_response().unwrap().is_none());
        exchange.received_mut().extend_from_slice(&answer[3..10]);
        assert_eq!(exchange.wanted_bytes(), answer.len() - 10);
        assert!(exchange.next_response().unwrap().is_none());
        exchange.received_mut().extend_from_slice(&answer[10..]);
        let (answered, response) = exchange.next_response().unwrap().unwrap();
        assert_eq!(answered, id);
        assert!(!exchange.has_in_flight());
        exchange.on_api_versions(response).unwrap();
        assert_eq!(exchange.max_common_version(ApiKey::Fetch), Some(17));
    }
}
