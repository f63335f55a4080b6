//! Kafka's wire protocol, as our own bounded codec.
//!
//! - `codec.rs`: the bounded [`Decoder`] and the [`Encoder`] (no wire length is trusted beyond
//!   the bytes left in the frame; blobs are zero-copy `Bytes` slices).
//! - `wire.rs`: how Rust field types map to Kafka types, per version.
//! - `dsl.rs`: the `message!` table that generates every message struct.
//! - `messages/`: the message tables. `header.rs`: framing and headers.
//! - this file: the API table ([`ApiKey`], supported versions) and the entry points
//!   [`decode_request_frame`] (and its shorthand [`decode_request`]), [`encode_request`],
//!   [`decode_response`], [`encode_response`] and [`encode_response_parts`] (records spliced in
//!   without a copy). Requests are read as Kafka reads them, ignoring bytes after the last field
//!   of their version; responses are strict.
//!
//! See `docs/protocol.md` for the bound rules and the table of supported versions.

pub mod codec;
pub mod dsl;
pub mod error_code;
mod fuzz;
pub mod header;
pub mod messages;
pub mod wire;

use bytes::Bytes;

pub use codec::{DecodeError, Decoder, EncodeError, Encoder, ResponsePart};
pub use error_code::ErrorCode;
pub use fuzz::{fuzz_produce_decode, fuzz_request_decode};
pub use header::{DEFAULT_MAX_FRAME_BYTES, RequestHeader, ResponseHeader, split_frame};
pub use messages::*;
pub use wire::{Ctx, Generator, Records, Uuid, VersionRange, Wire};

/// The metadata topic every node hosts (KIP-595's `__cluster_metadata`, partition 0).
pub const METADATA_TOPIC: &str = "__cluster_metadata";
/// Kafka's `Uuid.METADATA_TOPIC_ID` (`AAAAAAAAAAAAAAAAAAAAAQ`), for Fetch v13+.
pub const METADATA_TOPIC_ID: Uuid = Uuid([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);

use messages::api_versions_response::ApiVersion;

/// The API table: key, versions we speak, versions that are flexible (KIP-482), and the
/// request and response types. Adding a version is a change of one number here (plus the
/// new fields, if any, in the message's `message!` table).
macro_rules! apis {
    ($(
        $variant:ident = $key:literal {
            versions: $versions:expr,
            flexible: $flexible:expr $(,)?
        } => $request:ident, $response:ident;
    )*) => {
        /// The APIs ringlog speaks.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(i16)]
        pub enum ApiKey {
            $($variant = $key,)*
        }

        impl ApiKey {
            pub const ALL: &[ApiKey] = &[$(ApiKey::$variant,)*];

            pub fn from_i16(key: i16) -> Option<ApiKey> {
                match key {
                    $($key => Some(ApiKey::$variant),)*
                    _ => None,
                }
            }

            pub const fn key(self) -> i16 {
                self as i16
            }

            pub const fn name(self) -> &'static str {
                match self {
                    $(ApiKey::$variant => stringify!($variant),)*
                }
            }

            /// The versions we decode and encode.
            pub fn versions(self) -> VersionRange {
                match self {
                    $(ApiKey::$variant => VersionRange::of($versions),)*
                }
            }

            /// The versions of this API that are flexible (compact lengths, tagged fields).
            pub fn flexible_versions(self) -> VersionRange {
                match self {
                    $(ApiKey::$variant => VersionRange::of($flexible),)*
                }
            }
        }

        /// A decoded request body.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Request {
            $($variant($request),)*
        }

        /// A response body.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Response {
            $($variant($response),)*
        }

        $(
            impl From<$request> for Request {
                fn from(r: $request) -> Request {
                    Request::$variant(r)
                }
            }
            impl From<$response> for Response {
                fn from(r: $response) -> Response {
                    Response::$variant(r)
                }
            }
        )*

        impl Request {
            pub fn api_key(&self) -> ApiKey {
                match self {
                    $(Request::$variant(_) => ApiKey::$variant,)*
                }
            }

            /// Decodes a request body (after the header) of a given API and version.
            pub fn decode_body(api: ApiKey, d: &mut Decoder, c: Ctx) -> Result<Request, DecodeError> {
                Ok(match api {
                    $(ApiKey::$variant => Request::$variant(<$request as Wire>::decode(d, c)?),)*
                })
            }

            pub fn encode_body(&self, e: &mut Encoder, c: Ctx) -> Result<(), EncodeError> {
                match self {
                    $(Request::$variant(r) => r.encode(e, c),)*
                }
            }

            /// A deterministic request holding only fields that exist at `version`.
            pub fn generate(api: ApiKey, version: i16, g: &mut Generator) -> Request {
                let c = Ctx::new(version, api.is_flexible(version));
                match api {
                    $(ApiKey::$variant => Request::$variant(<$request as Wire>::generate(g, c)),)*
                }
            }
        }

        impl Response {
            pub fn api_key(&self) -> ApiKey {
                match self {
                    $(Response::$variant(_) => ApiKey::$variant,)*
                }
            }

            pub fn decode_body(api: ApiKey, d: &mut Decoder, c: Ctx) -> Result<Response, DecodeError> {
                Ok(match api {
                    $(ApiKey::$variant => Response::$variant(<$response as Wire>::decode(d, c)?),)*
                })
            }

            pub fn encode_body(&self, e: &mut Encoder, c: Ctx) -> Result<(), EncodeError> {
                match self {
                    $(Response::$variant(r) => r.encode(e, c),)*
                }
            }

            /// A deterministic response holding only fields that exist at `version`.
            pub fn generate(api: ApiKey, version: i16, g: &mut Generator) -> Response {
                let c = Ctx::new(version, api.is_flexible(version));
                match api {
                    $(ApiKey::$variant => Response::$variant(<$response as Wire>::generate(g, c)),)*
                }
            }
        }
    };
}

apis! {
    Produce = 0 { versions: 3..=10, flexible: 9.. } => ProduceRequest, ProduceResponse;
    Fetch = 1 { versions: 4..=17, flexible: 12.. } => FetchRequest, FetchResponse;
    ListOffsets = 2 { versions: 1..=7, flexible: 6.. } => ListOffsetsRequest, ListOffsetsResponse;
    Metadata = 3 { versions: 0..=12, flexible: 9.. } => MetadataRequest, MetadataResponse;
    OffsetCommit = 8 { versions: 2..=9, flexible: 8.. } => OffsetCommitRequest, OffsetCommitResponse;
    OffsetFetch = 9 { versions: 1..=9, flexible: 6.. } => OffsetFetchRequest, OffsetFetchResponse;
    FindCoordinator = 10 { versions: 0..=4, flexible: 3.. } => FindCoordinatorRequest, FindCoordinatorResponse;
    JoinGroup = 11 { versions: 0..=9, flexible: 6.. } => JoinGroupRequest, JoinGroupResponse;
    Heartbeat = 12 { versions: 0..=4, flexible: 4.. } => HeartbeatRequest, HeartbeatResponse;
    LeaveGroup = 13 { versions: 0..=5, flexible: 4.. } => LeaveGroupRequest, LeaveGroupResponse;
    SyncGroup = 14 { versions: 0..=5, flexible: 4.. } => SyncGroupRequest, SyncGroupResponse;
    DescribeGroups = 15 { versions: 0..=5, flexible: 5.. } => DescribeGroupsRequest, DescribeGroupsResponse;
    ListGroups = 16 { versions: 0..=5, flexible: 3.. } => ListGroupsRequest, ListGroupsResponse;
    SaslHandshake = 17 { versions: 0..=1, flexible: 2.. } => SaslHandshakeRequest, SaslHandshakeResponse;
    ApiVersions = 18 { versions: 0..=4, flexible: 3.. } => ApiVersionsRequest, ApiVersionsResponse;
    CreateTopics = 19 { versions: 2..=7, flexible: 5.. } => CreateTopicsRequest, CreateTopicsResponse;
    DeleteTopics = 20 { versions: 1..=6, flexible: 4.. } => DeleteTopicsRequest, DeleteTopicsResponse;
    DeleteRecords = 21 { versions: 0..=2, flexible: 2.. } => DeleteRecordsRequest, DeleteRecordsResponse;
    InitProducerId = 22 { versions: 0..=4, flexible: 2.. } => InitProducerIdRequest, InitProducerIdResponse;
    OffsetForLeaderEpoch = 23 { versions: 2..=4, flexible: 4.. }
        => OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse;
    DescribeAcls = 29 { versions: 0..=3, flexible: 2.. } => DescribeAclsRequest, DescribeAclsResponse;
    CreateAcls = 30 { versions: 0..=3, flexible: 2.. } => CreateAclsRequest, CreateAclsResponse;
    DeleteAcls = 31 { versions: 0..=3, flexible: 2.. } => DeleteAclsRequest, DeleteAclsResponse;
    DescribeConfigs = 32 { versions: 1..=4, flexible: 4.. } => DescribeConfigsRequest, DescribeConfigsResponse;
    AlterConfigs = 33 { versions: 0..=2, flexible: 2.. } => AlterConfigsRequest, AlterConfigsResponse;
    SaslAuthenticate = 36 { versions: 0..=2, flexible: 2.. }
        => SaslAuthenticateRequest, SaslAuthenticateResponse;
    CreatePartitions = 37 { versions: 0..=3, flexible: 2.. } => CreatePartitionsRequest, CreatePartitionsResponse;
    DeleteGroups = 42 { versions: 0..=2, flexible: 2.. } => DeleteGroupsRequest, DeleteGroupsResponse;
    IncrementalAlterConfigs = 44 { versions: 0..=1, flexible: 1.. }
        => IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse;
    OffsetDelete = 47 { versions: 0..=0, flexible: 1.. } => OffsetDeleteRequest, OffsetDeleteResponse;
    DescribeUserScramCredentials = 50 { versions: 0..=0, flexible: 0.. }
        => DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse;
    AlterUserScramCredentials = 51 { versions: 0..=0, flexible: 0.. }
        => AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse;
    Vote = 52 { versions: 0..=2, flexible: 0.. } => VoteRequest, VoteResponse;
    BeginQuorumEpoch = 53 { versions: 0..=1, flexible: 1.. } => BeginQuorumEpochRequest, BeginQuorumEpochResponse;
    EndQuorumEpoch = 54 { versions: 0..=1, flexible: 1.. } => EndQuorumEpochRequest, EndQuorumEpochResponse;
    DescribeQuorum = 55 { versions: 0..=2, flexible: 0.. } => DescribeQuorumRequest, DescribeQuorumResponse;
    FetchSnapshot = 59 { versions: 0..=1, flexible: 0.. } => FetchSnapshotRequest, FetchSnapshotResponse;
    DescribeCluster = 60 { versions: 0..=1, flexible: 0.. } => DescribeClusterRequest, DescribeClusterResponse;
    AllocateProducerIds = 67 { versions: 0..=0, flexible: 0.. }
        => AllocateProducerIdsRequest, AllocateProducerIdsResponse;
    AddRaftVoter = 80 { versions: 0..=1, flexible: 0.. } => AddRaftVoterRequest, AddRaftVoterResponse;
    RemoveRaftVoter = 81 { versions: 0..=0, flexible: 0.. } => RemoveRaftVoterRequest, RemoveRaftVoterResponse;
    UpdateRaftVoter = 82 { versions: 0..=0, flexible: 0.. } => UpdateRaftVoterRequest, UpdateRaftVoterResponse;
}

impl ApiKey {
    pub fn is_flexible(self, version: i16) -> bool {
        self.flexible_versions().contains(version)
    }

    /// Request header v2 for flexible versions, else v1 (none of our APIs uses v0).
    pub fn request_header_version(self, version: i16) -> i16 {
        if self.is_flexible(version) { 2 } else { 1 }
    }

    /// Response header v1 for flexible versions, else v0; ApiVersions always v0 (KIP-511).
    pub fn response_header_version(self, version: i16) -> i16 {
        if self != ApiKey::ApiVersions && self.is_flexible(version) {
            1
        } else {
            0
        }
    }
}

/// The (api key, min, max) rows an ApiVersions response advertises.
pub fn supported_api_versions() -> Vec<ApiVersion> {
    ApiKey::ALL
        .iter()
        .map(|api| {
            let versions = api.versions();
            ApiVersion {
                api_key: api.key(),
                min_version: versions.min,
                max_version: versions.max,
            }
        })
        .collect()
}

/// One request frame as [`decode_request_frame`] read it.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedRequest {
    pub header: RequestHeader,
    pub request: Request,
    /// Bytes after the last field the version defines, which were not read (Kafka's rule).
    pub ignored_trailing_bytes: usize,
}

/// Decodes one request frame (the bytes after the int32 size prefix; see [`split_frame`]),
/// dropping the count of ignored trailing bytes. See [`decode_request_frame`].
pub fn decode_request(frame: Bytes) -> Result<(RequestHeader, Request), DecodeError> {
    decode_request_frame(frame).map(|decoded| (decoded.header, decoded.request))
}

/// Decodes one request frame (the bytes after the int32 size prefix; see [`split_frame`]) as
/// Kafka's brokers do: the header and the fields the API version defines are read, every
/// length among them checked against the frame, and **bytes after the last field are
/// ignored** (counted in [`DecodedRequest::ignored_trailing_bytes`]). Kafka's generated
/// readers never look at what is left of a request buffer, and real clients rely on it:
/// librdkafka ≥ 2.1 asks for all topics with Metadata v12 followed by three such bytes
/// (docs/protocol.md, "Parsing rule").
///
/// A known API at a version we do not speak gives [`DecodeError::UnsupportedVersion`] with the
/// correlation id, read from the fixed part of the header that every version shares: answer
/// ApiVersions with [`unsupported_api_versions_response`] (KIP-511), close the connection for
/// any other API (as Kafka does).
pub fn decode_request_frame(frame: Bytes) -> Result<DecodedRequest, DecodeError> {
    let mut d = Decoder::new(frame);
    let mut header = RequestHeader::decode_fixed(&mut d)?;
    let api = ApiKey::from_i16(header.api_key).ok_or(DecodeError::UnknownApiKey {
        api_key: header.api_key,
        correlation_id: header.correlation_id,
    })?;
    let version = header.api_version;
    if !api.versions().contains(version) {
        return Err(DecodeError::UnsupportedVersion {
            api_key: header.api_key,
            version,
            correlation_id: header.correlation_id,
        });
    }
    let flexible = api.is_flexible(version);
    header.decode_rest(&mut d, flexible)?;
    let request = Request::decode_body(api, &mut d, Ctx::new(version, flexible))?;
    Ok(DecodedRequest {
        header,
        request,
        ignored_trailing_bytes: d.remaining(),
    })
}

/// Encodes a request frame, size prefix included. `header.api_key` must match the request.
pub fn encode_request(header: &RequestHeader, request: &Request) -> Result<Bytes, EncodeError> {
    let api = request.api_key();
    let version = header.api_version;
    if header.api_key != api.key() {
        return Err(EncodeError::ApiKeyMismatch {
            header_api_key: header.api_key,
            body_api_key: api.key(),
        });
    }
    if !api.versions().contains(version) {
        return Err(EncodeError::UnsupportedVersion {
            api_key: header.api_key,
            version,
        });
    }
    let flexible = api.is_flexible(version);
    let mut e = Encoder::new();
    e.put_i32(0); // size, patched below
    header.encode(&mut e, flexible)?;
    request.encode_body(&mut e, Ctx::new(version, flexible))?;
    finish_frame(e)
}

/// Decodes one response frame (after the size prefix). The caller knows the API and version
/// from the request it sent with this correlation id.
///
/// Unlike requests, responses are strict: bytes after the last field are
/// [`DecodeError::TrailingBytes`]. The only responses we decode come from ringlog peers and
/// from the nodes our own [`crate::client::Client`] talks to, written by an encoder the
/// differential tests pin byte for byte to Kafka's; a byte too many there is a bug or a stream
/// out of step, and it should be loud.
pub fn decode_response(
    api: ApiKey,
    version: i16,
    frame: Bytes,
) -> Result<(ResponseHeader, Response), DecodeError> {
    let mut d = Decoder::new(frame);
    let header_flexible = api.response_header_version(version) == 1;
    let header = ResponseHeader::decode(&mut d, header_flexible)?;
    if !api.versions().contains(version) {
        return Err(DecodeError::UnsupportedVersion {
            api_key: api.key(),
            version,
            correlation_id: header.correlation_id,
        });
    }
    let c = Ctx::new(version, api.is_flexible(version));
    let response = Response::decode_body(api, &mut d, c)?;
    expect_end(&d, api, version)?;
    Ok((header, response))
}

/// Encodes a response frame, size prefix included, into one buffer (records are copied; a
/// [`Records::External`] is an error here: use [`encode_response_parts`]).
pub fn encode_response(
    correlation_id: i32,
    version: i16,
    response: &Response,
) -> Result<Bytes, EncodeError> {
    let mut e = Encoder::new();
    e.put_i32(0); // size, patched below
    encode_response_into(&mut e, correlation_id, version, response)?;
    finish_frame(e)
}

/// Encodes a response frame as a gather list, without copying any records blob.
///
/// The parts, written in order (e.g. one `writev`, or `write` + `sendfile` + `write`), form the
/// whole frame, size prefix included:
/// - [`ResponsePart::Encoded`]: protocol bytes (the first one starts with the size prefix).
/// - [`ResponsePart::Records`]: a `Records::Bytes` blob, by reference.
/// - [`ResponsePart::External`]: a `Records::External { token, size_bytes }` the caller put in
///   the response; its length prefix is already in the preceding part and the size prefix
///   counts it, so the caller must write exactly `size_bytes` bytes of that region here
///   (e.g. `sendfile(segment_fd, offset, size_bytes)`), or the connection must be closed.
pub fn encode_response_parts(
    correlation_id: i32,
    version: i16,
    response: &Response,
) -> Result<Vec<ResponsePart>, EncodeError> {
    let mut e = Encoder::with_parts();
    encode_response_into(&mut e, correlation_id, version, response)?;
    let mut parts = e.into_parts();
    let size_bytes: usize = parts.iter().map(part_len).sum();
    let size = i32::try_from(size_bytes).map_err(|_| EncodeError::FrameTooLarge { size_bytes })?;
    // Put the size prefix in front of the first encoded bytes (always the header).
    let mut first = bytes::BytesMut::with_capacity(4 + parts.first().map_or(0, part_len));
    first.extend_from_slice(&size.to_be_bytes());
    match parts.first() {
        Some(ResponsePart::Encoded(head)) => {
            first.extend_from_slice(head);
            parts[0] = ResponsePart::Encoded(first.freeze());
        }
        _ => parts.insert(0, ResponsePart::Encoded(first.freeze())),
    }
    Ok(parts)
}

/// The v0 ApiVersions response to an ApiVersions request at a version we do not speak
/// (KIP-511): error UNSUPPORTED_VERSION plus our ranges, so the client retries with one.
pub fn unsupported_api_versions_response(correlation_id: i32) -> Result<Bytes, EncodeError> {
    let response = ApiVersionsResponse {
        error_code: ErrorCode::UnsupportedVersion.code(),
        api_keys: supported_api_versions(),
        ..ApiVersionsResponse::default()
    };
    encode_response(correlation_id, 0, &Response::ApiVersions(response))
}

fn part_len(part: &ResponsePart) -> usize {
    match part {
        ResponsePart::Encoded(b) | ResponsePart::Records(b) => b.len(),
        ResponsePart::External { size_bytes, .. } => *size_bytes as usize,
    }
}

fn encode_response_into(
    e: &mut Encoder,
    correlation_id: i32,
    version: i16,
    response: &Response,
) -> Result<(), EncodeError> {
    let api = response.api_key();
    if !api.versions().contains(version) {
        return Err(EncodeError::UnsupportedVersion {
            api_key: api.key(),
            version,
        });
    }
    let header_flexible = api.response_header_version(version) == 1;
    ResponseHeader { correlation_id }.encode(e, header_flexible);
    response.encode_body(e, Ctx::new(version, api.is_flexible(version)))
}

/// Patches the int32 size prefix written as a placeholder at the start of `e`.
fn finish_frame(mut e: Encoder) -> Result<Bytes, EncodeError> {
    let size_bytes = e.len() - 4;
    let size = i32::try_from(size_bytes).map_err(|_| EncodeError::FrameTooLarge { size_bytes })?;
    e.buf_mut()[..4].copy_from_slice(&size.to_be_bytes());
    Ok(e.into_bytes())
}

/// The strict end of a response (requests have no such check: see [`decode_request_frame`]).
fn expect_end(d: &Decoder, api: ApiKey, version: i16) -> Result<(), DecodeError> {
    if d.remaining() != 0 {
        return Err(DecodeError::TrailingBytes {
            api_key: api.key(),
            version,
            position: d.position(),
            remaining: d.remaining(),
        });
    }
    Ok(())
}
