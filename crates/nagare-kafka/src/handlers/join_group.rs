//! JoinGroup (11): joins a member to a group and waits for the rebalance to complete
//! (MEMBER_ID_REQUIRED first for new dynamic members at v4+; static members at v5+).

use crate::meters::Counted;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{
    ApiKey, ConsumerProtocolSubscription, JoinGroupRequest, JoinGroupResponse,
};
use kafka_protocol::protocol::{Decodable, Message};
use nagare_core::groups::{GroupError, JoinRequest, Protocol};
use nagare_core::security::Operation;

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{group_error, ResponseError};
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::JoinGroup,
    advertised: (0, 9),
    accepted: (0, 9),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: JoinGroupRequest = decode(&req)?;
    if !session.group_allowed(Operation::Read, &request.group_id) {
        // Kafka answers with an empty member id and no generation.
        let response = JoinGroupResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.counted())
            .with_generation_id(-1);
        return encode(&response, req.version);
    }
    // Only the consumer protocol's metadata is a subscription; other group types (Connect,
    // Streams' own) are opaque, as in Kafka.
    let consumer = request.protocol_type.as_str() == "consumer";
    let join = JoinRequest {
        group_id: request.group_id.0.to_string(),
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.as_ref().map(|s| s.to_string()),
        client_id: req
            .header
            .client_id
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default(),
        client_host: "/127.0.0.1".to_string(),
        session_timeout_ms: request.session_timeout_ms,
        // v0 has no rebalance timeout: the session timeout bounds the rebalance.
        rebalance_timeout_ms: if req.version == 0 {
            request.session_timeout_ms
        } else {
            request.rebalance_timeout_ms
        },
        protocol_type: request.protocol_type.to_string(),
        protocols: request
            .protocols
            .iter()
            .map(|p| Protocol {
                name: p.name.to_string(),
                metadata: p.metadata.clone(),
                topics: if consumer {
                    subscription_topics(&p.metadata)
                } else {
                    Vec::new()
                },
            })
            .collect(),
        require_known_member_id: req.version >= 4,
    };
    let response = match state.groups.join(join).await {
        Ok(j) => JoinGroupResponse::default()
            .with_generation_id(j.generation)
            .with_protocol_type(if req.version >= 7 {
                j.protocol_type.map(str_bytes)
            } else {
                None
            })
            .with_protocol_name(Some(str_bytes(j.protocol_name.unwrap_or_default())))
            .with_leader(str_bytes(j.leader))
            .with_member_id(str_bytes(j.member_id))
            .with_members(
                j.members
                    .into_iter()
                    .map(|m| {
                        JoinGroupResponseMember::default()
                            .with_member_id(str_bytes(m.member_id))
                            .with_group_instance_id(if req.version >= 5 {
                                m.group_instance_id.map(str_bytes)
                            } else {
                                None
                            })
                            .with_metadata(m.metadata)
                    })
                    .collect(),
            ),
        Err(e) => {
            let member_id = match &e {
                GroupError::MemberIdRequired(id) => str_bytes(id.clone()),
                _ => request.member_id.clone(),
            };
            JoinGroupResponse::default()
                .with_error_code(group_error(&e).counted())
                .with_generation_id(-1)
                .with_member_id(member_id)
        }
    };
    encode(&response, req.version)
}

/// The topics of a consumer-protocol subscription: a version, then the body at that
/// version. Newer versions only add fields, so they are read as the newest we know, as
/// Kafka does. Best effort: an unreadable subscription names no topics.
fn subscription_topics(metadata: &Bytes) -> Vec<String> {
    let mut body = metadata.clone();
    if body.remaining() < 2 {
        return Vec::new();
    }
    let version = body.get_i16();
    if version < 0 {
        return Vec::new();
    }
    let version = version.min(ConsumerProtocolSubscription::VERSIONS.max);
    if nagare_kafka_guard::check_subscription(version, &body).is_err() {
        return Vec::new();
    }
    ConsumerProtocolSubscription::decode(&mut body, version)
        .map(|s| s.topics.iter().map(|t| t.to_string()).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use bytes::{BufMut, BytesMut};
    use kafka_protocol::protocol::Encodable;

    use super::*;
    use crate::handlers::str_bytes;

    fn subscription(version: i16, topics: &[&str]) -> Bytes {
        let mut b = BytesMut::new();
        b.put_i16(version);
        ConsumerProtocolSubscription::default()
            .with_topics(topics.iter().map(|t| str_bytes(*t)).collect())
            .encode(&mut b, version.min(3))
            .unwrap();
        b.freeze()
    }

    #[test]
    fn subscription_topics_at_every_version() {
        for v in 0..=3 {
            assert_eq!(
                subscription_topics(&subscription(v, &["a", "b"])),
                ["a", "b"]
            );
        }
        // A newer version than we know is read as our newest.
        assert_eq!(subscription_topics(&subscription(7, &["t"])), ["t"]);
    }

    #[test]
    fn unreadable_subscriptions_name_nothing() {
        assert!(subscription_topics(&Bytes::from_static(b"\0")).is_empty());
        assert!(subscription_topics(&Bytes::from_static(b"\xff\xff\0\0\0\0")).is_empty());
        // A count far beyond the bytes present is refused before anything is allocated.
        assert!(subscription_topics(&Bytes::from_static(b"\0\0\x7f\xff\xff\xff")).is_empty());
        assert!(subscription_topics(&Bytes::from_static(b"meta-range")).is_empty());
    }
}
