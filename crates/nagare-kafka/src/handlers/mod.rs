//! One handler per Kafka API key, each in its own file declaring the versions it answers.
//! [`REGISTRY`] lists them all; ApiVersions is built from it, and the connection refuses
//! any API or version not in it. See `HANDLERS.md` for how to add one.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::codec::ParsedRequest;
use crate::{KafkaError, KafkaState, Reply};

pub mod api_versions;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_groups;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod sync_group;

/// What a handler returns: the reply, or an error that closes the connection.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<Reply, KafkaError>> + Send + 'static>>;
/// A handler: shared state and the request (header decoded, body not yet).
pub type HandlerFn = fn(Arc<KafkaState>, ParsedRequest) -> HandlerFuture;

/// One API: its key, the versions we tell clients about and the versions we answer.
pub struct Handler {
    pub key: ApiKey,
    /// The range listed in ApiVersions.
    pub advertised: (i16, i16),
    /// The range actually answered (a subrange of `advertised` for Produce, whose
    /// versions 0-2 carry the old message format that is refused anyway).
    pub accepted: (i16, i16),
    pub call: HandlerFn,
}

impl Handler {
    pub fn accepts(&self, version: i16) -> bool {
        (self.accepted.0..=self.accepted.1).contains(&version)
    }
}

/// Every implemented API. Adding an API = one file + one line here.
pub static REGISTRY: &[Handler] = &[
    produce::HANDLER,
    fetch::HANDLER,
    list_offsets::HANDLER,
    metadata::HANDLER,
    api_versions::HANDLER,
    create_topics::HANDLER,
    delete_topics::HANDLER,
    init_producer_id::HANDLER,
    offset_for_leader_epoch::HANDLER,
    describe_configs::HANDLER,
    create_partitions::HANDLER,
    describe_cluster::HANDLER,
    find_coordinator::HANDLER,
    join_group::HANDLER,
    sync_group::HANDLER,
    heartbeat::HANDLER,
    leave_group::HANDLER,
    offset_commit::HANDLER,
    offset_fetch::HANDLER,
    list_groups::HANDLER,
    describe_groups::HANDLER,
    delete_groups::HANDLER,
    offset_delete::HANDLER,
];

/// The handler of an API key, if we implement it.
pub fn find(key: i16) -> Option<&'static Handler> {
    REGISTRY.iter().find(|h| h.key as i16 == key)
}

/// Decodes the request body as `T` at the request's version, after the allocation guard
/// has walked it (see `crate::guard`).
pub fn decode<T: Decodable>(req: &ParsedRequest) -> Result<T, KafkaError> {
    crate::guard::check(req.api_key, &req.body, req.version)
        .map_err(|e| KafkaError::Malformed(format!("{:?} v{}: {e}", req.api_key, req.version)))?;
    let mut body = req.body.clone();
    T::decode(&mut body, req.version)
        .map_err(|e| KafkaError::Malformed(format!("{:?} v{}: {e}", req.api_key, req.version)))
}

/// Encodes a response body at `version`.
pub fn encode<T: Encodable>(msg: &T, version: i16) -> Result<Reply, KafkaError> {
    let size = msg
        .compute_size(version)
        .map_err(|e| KafkaError::Encode(e.to_string()))?;
    let mut buf = BytesMut::with_capacity(size);
    msg.encode(&mut buf, version)
        .map_err(|e| KafkaError::Encode(e.to_string()))?;
    Ok(Reply::Body(buf.freeze()))
}

/// Whether the response to this request has the v1 header (a tagged-field byte).
pub fn response_header_v1(req: &ParsedRequest) -> bool {
    req.api_key != ApiKey::ApiVersions && req.api_key.response_header_version(req.version) >= 1
}

/// A protocol string from a Rust one.
pub fn str_bytes(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// Decodes any request body we implement and drops it (fuzzing entry point).
pub fn decode_any(req: &ParsedRequest) -> Result<(), KafkaError> {
    crate::guard::check(req.api_key, &req.body, req.version).map_err(KafkaError::Malformed)?;
    let mut body: Bytes = req.body.clone();
    kafka_protocol::messages::RequestKind::decode(req.api_key, &mut body, req.version)
        .map(|_| ())
        .map_err(|e| KafkaError::Malformed(e.to_string()))
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests;
