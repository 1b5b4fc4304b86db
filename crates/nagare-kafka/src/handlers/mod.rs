//! One handler per Kafka API key, each in its own file declaring the versions it answers.
//! [`REGISTRY`] lists them all; ApiVersions is built from it, [`route`] finds a request's
//! handler in a table indexed by API key, and any API or version not in it is refused. See `HANDLERS.md` for how to add one.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::codec::{self, ParsedRequest, RequestError};
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) mod add_offsets_to_txn;
pub(crate) mod add_partitions_to_txn;
pub(crate) mod alter_configs;
pub(crate) mod alter_share_group_offsets;
pub(crate) mod alter_user_scram_credentials;
pub(crate) mod api_versions;
pub(crate) mod config_resources;
pub(crate) mod consumer_group_describe;
pub(crate) mod consumer_group_heartbeat;
pub(crate) mod create_acls;
pub(crate) mod create_partitions;
pub(crate) mod create_topics;
pub(crate) mod delete_acls;
pub(crate) mod delete_groups;
pub(crate) mod delete_records;
pub(crate) mod delete_share_group_offsets;
pub(crate) mod delete_topics;
pub(crate) mod describe_acls;
pub(crate) mod describe_cluster;
pub(crate) mod describe_configs;
pub(crate) mod describe_groups;
pub(crate) mod describe_log_dirs;
pub(crate) mod describe_producers;
pub(crate) mod describe_share_group_offsets;
pub(crate) mod describe_topic_partitions;
pub(crate) mod describe_transactions;
pub(crate) mod describe_user_scram_credentials;
pub(crate) mod end_txn;
pub(crate) mod fetch;
pub(crate) mod find_coordinator;
pub(crate) mod heartbeat;
pub(crate) mod incremental_alter_configs;
pub(crate) mod init_producer_id;
pub(crate) mod join_group;
pub(crate) mod leave_group;
pub(crate) mod list_groups;
pub(crate) mod list_offsets;
pub(crate) mod list_transactions;
pub(crate) mod metadata;
pub(crate) mod offset_commit;
pub(crate) mod offset_delete;
pub(crate) mod offset_fetch;
pub(crate) mod offset_for_leader_epoch;
pub(crate) mod produce;
pub(crate) mod sasl_authenticate;
pub(crate) mod sasl_handshake;
pub(crate) mod share_acknowledge;
pub(crate) mod share_common;
pub(crate) mod share_fetch;
pub(crate) mod share_group_describe;
pub(crate) mod share_group_heartbeat;
pub(crate) mod share_groups_admin;
pub(crate) mod share_v2;
pub(crate) mod sync_group;
pub(crate) mod txn_offset_commit;

/// What a handler returns: the reply, or an error that closes the connection.
pub(crate) type HandlerFuture =
    Pin<Box<dyn Future<Output = Result<Reply, KafkaError>> + Send + 'static>>;
/// A handler: shared state, the connection's session (principal, ACL decisions) and the
/// request (header decoded, body not yet).
pub(crate) type HandlerFn = fn(Arc<KafkaState>, Arc<Session>, ParsedRequest) -> HandlerFuture;

/// One API: its key, the versions we tell clients about and the versions we answer.
pub(crate) struct Handler {
    pub key: ApiKey,
    /// The range listed in ApiVersions.
    pub advertised: (i16, i16),
    /// The range actually answered (a subrange of `advertised` for Produce, whose
    /// versions 0-2 carry the old message format that is refused anyway).
    pub accepted: (i16, i16),
    pub call: HandlerFn,
}

impl Handler {
    pub(crate) fn accepts(&self, version: i16) -> bool {
        (self.accepted.0..=self.accepted.1).contains(&version)
    }
}

/// Every implemented API. Adding an API = one file + one line here.
pub(crate) static REGISTRY: &[Handler] = &[
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
    alter_configs::HANDLER,
    incremental_alter_configs::HANDLER,
    delete_records::HANDLER,
    describe_log_dirs::HANDLER,
    describe_topic_partitions::HANDLER,
    create_partitions::HANDLER,
    describe_cluster::HANDLER,
    find_coordinator::HANDLER,
    join_group::HANDLER,
    sync_group::HANDLER,
    heartbeat::HANDLER,
    leave_group::HANDLER,
    offset_commit::HANDLER,
    offset_fetch::HANDLER,
    consumer_group_heartbeat::HANDLER,
    consumer_group_describe::HANDLER,
    list_groups::HANDLER,
    describe_groups::HANDLER,
    delete_groups::HANDLER,
    offset_delete::HANDLER,
    sasl_handshake::HANDLER,
    sasl_authenticate::HANDLER,
    describe_user_scram_credentials::HANDLER,
    alter_user_scram_credentials::HANDLER,
    describe_acls::HANDLER,
    create_acls::HANDLER,
    delete_acls::HANDLER,
    add_partitions_to_txn::HANDLER,
    add_offsets_to_txn::HANDLER,
    end_txn::HANDLER,
    txn_offset_commit::HANDLER,
    describe_transactions::HANDLER,
    list_transactions::HANDLER,
    describe_producers::HANDLER,
    share_group_heartbeat::HANDLER,
    share_fetch::HANDLER,
    share_acknowledge::HANDLER,
    share_group_describe::HANDLER,
    describe_share_group_offsets::HANDLER,
    alter_share_group_offsets::HANDLER,
    delete_share_group_offsets::HANDLER,
];

/// One slot per API key number: the handler of every implemented key, found with one
/// index instead of a search. Wide enough for every key Kafka defines; a key past it is
/// simply not implemented.
const TABLE_LEN: usize = 128;

static TABLE: [Option<&Handler>; TABLE_LEN] = {
    let mut table = [None; TABLE_LEN];
    let mut i = 0;
    while i < REGISTRY.len() {
        let key = REGISTRY[i].key as usize;
        // A duplicate or out-of-range key fails the build here.
        assert!(key < TABLE_LEN && table[key].is_none());
        table[key] = Some(&REGISTRY[i]);
        i += 1;
    }
    table
};

/// The handler of an API key number, if we implement it.
pub(crate) fn lookup(api_key: i16) -> Option<&'static Handler> {
    usize::try_from(api_key)
        .ok()
        .and_then(|k| TABLE.get(k).copied().flatten())
}

/// Routes one frame: its handler, found once from the key number, and the request with
/// its header decoded. An API or version we do not answer is refused before anything
/// past the fixed head is decoded.
pub(crate) fn route(frame: Bytes) -> Result<(&'static Handler, ParsedRequest), RequestError> {
    let head = codec::peek_head(&frame)?;
    let Some(handler) = lookup(head.api_key) else {
        return Err(RequestError::UnknownApi {
            key: head.api_key,
            correlation_id: head.correlation_id,
        });
    };
    if !handler.accepts(head.version) {
        return Err(RequestError::UnsupportedVersion {
            key: head.api_key,
            version: head.version,
            correlation_id: head.correlation_id,
        });
    }
    let req = codec::decode_header(frame, handler.key, head)?;
    Ok((handler, req))
}

/// Decodes the request body as `T` at the request's version, after the allocation guard
/// has walked it (see `nagare_kafka_guard`).
pub(crate) fn decode<T: Decodable>(req: &ParsedRequest) -> Result<T, KafkaError> {
    nagare_kafka_guard::check_request(req.api_key, req.version, &req.body)
        .map_err(|e| KafkaError::Malformed(format!("{:?} v{}: {e}", req.api_key, req.version)))?;
    let mut body = req.body.clone();
    T::decode(&mut body, req.version)
        .map_err(|e| KafkaError::Malformed(format!("{:?} v{}: {e}", req.api_key, req.version)))
}

/// Encodes a response body at `version`.
pub(crate) fn encode<T: Encodable>(msg: &T, version: i16) -> Result<Reply, KafkaError> {
    let size = msg
        .compute_size(version)
        .map_err(|e| KafkaError::Encode(e.to_string()))?;
    let mut buf = BytesMut::with_capacity(size);
    msg.encode(&mut buf, version)
        .map_err(|e| KafkaError::Encode(e.to_string()))?;
    Ok(Reply::Body(buf.freeze()))
}

/// Whether the response to this request has the v1 header (a tagged-field byte).
pub(crate) fn response_header_v1(req: &ParsedRequest) -> bool {
    req.api_key != ApiKey::ApiVersions && req.api_key.response_header_version(req.version) >= 1
}

/// A protocol string from a Rust one.
pub(crate) fn str_bytes(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

#[cfg(test)]
mod acl_tests;
#[cfg(test)]
mod group_tests;
#[cfg(test)]
mod produce_order_tests;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod txn_tests;

#[cfg(test)]
mod route_tests {
    use bytes::{BufMut, BytesMut};

    use super::*;

    #[test]
    fn every_registered_key_is_found_by_index() {
        for h in REGISTRY {
            assert_eq!(lookup(h.key as i16).map(|f| f.key), Some(h.key));
        }
        assert!(lookup(-1).is_none());
        assert!(lookup(i16::MAX).is_none());
    }

    #[test]
    fn unknown_api_and_version_are_refused() {
        let mut f = BytesMut::new();
        f.put_i16(9999);
        f.put_i16(0);
        f.put_i32(7);
        assert!(matches!(
            route(f.freeze()),
            Err(RequestError::UnknownApi {
                key: 9999,
                correlation_id: 7
            })
        ));
        let mut f = BytesMut::new();
        f.put_i16(ApiKey::Produce as i16);
        f.put_i16(1);
        f.put_i32(8);
        assert!(matches!(
            route(f.freeze()),
            Err(RequestError::UnsupportedVersion { version: 1, .. })
        ));
        assert!(matches!(
            route(Bytes::from_static(b"abc")),
            Err(RequestError::Truncated(3))
        ));
    }
}
