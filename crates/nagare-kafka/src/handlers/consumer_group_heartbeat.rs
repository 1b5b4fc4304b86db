//! ConsumerGroupHeartbeat (68): membership and server-side assignment of KIP-848
//! consumer groups. Topic ids of the wire are turned into names for the coordinator and
//! back; the coordinator sees every topic of the broker so that subscriptions (by name or
//! regex) follow topics created and deleted while the group runs.

use crate::meters::Counted;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
};
use kafka_protocol::protocol::StrBytes;
use nagare_core::groups::{self, ConsumerHeartbeat, TopicMeta, TopicsSnapshot};
use nagare_core::security::Operation;
use nagare_core::Broker;
use uuid::Uuid;

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, group_error, ResponseError};
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::ConsumerGroupHeartbeat,
    advertised: (0, 1),
    accepted: (0, 1),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

/// Every topic of the broker, by name, internal ones (`__consumer_offsets`...) too: as
/// in Kafka, a regex subscription may match them.
pub(crate) fn topics_snapshot(broker: &Broker) -> TopicsSnapshot {
    let mut topics: TopicsSnapshot = broker
        .list_topics()
        .iter()
        .map(|t| {
            (
                t.name().to_string(),
                TopicMeta {
                    id: t.id(),
                    partitions: t.partition_count() as i32,
                },
            )
        })
        .collect();
    for t in crate::internal_topics::all(broker) {
        topics.insert(
            t.name.to_string(),
            TopicMeta {
                id: t.id,
                partitions: 1,
            },
        );
    }
    topics
}

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: ConsumerGroupHeartbeatRequest = decode(&req)?;
    let v = req.version;
    let refuse = |code: i16, message: Option<String>| {
        encode(
            &ConsumerGroupHeartbeatResponse::default()
                .with_error_code(code)
                .with_error_message(message.map(str_bytes))
                .with_member_epoch(-1),
            v,
        )
    };
    if !session.group_allowed(Operation::Read, &request.group_id) {
        return refuse(ResponseError::GroupAuthorizationFailed.counted(), None);
    }
    let topics = topics_snapshot(&state.broker);
    let names: HashMap<Uuid, &str> = topics
        .iter()
        .map(|(name, meta)| (meta.id, name.as_str()))
        .collect();
    // Owned partitions of topics that no longer exist are simply not owned any more.
    let owned = request.topic_partitions.as_ref().map(|tps| {
        let mut a = groups::Assignment::new();
        for tp in tps {
            if let Some(name) = names.get(&tp.topic_id) {
                a.entry(name.to_string())
                    .or_default()
                    .extend(tp.partitions.iter().copied());
            }
        }
        a
    });
    let hb = ConsumerHeartbeat {
        group_id: request.group_id.0.to_string(),
        member_id: request.member_id.to_string(),
        member_epoch: request.member_epoch,
        instance_id: request.instance_id.as_ref().map(|s| s.to_string()),
        rack_id: request.rack_id.as_ref().map(|s| s.to_string()),
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        subscribed_topic_names: request
            .subscribed_topic_names
            .as_ref()
            .map(|ts| ts.iter().map(|t| t.0.to_string()).collect()),
        subscribed_topic_regex: request
            .subscribed_topic_regex
            .as_ref()
            .map(|s| s.to_string()),
        server_assignor: request.server_assignor.as_ref().map(|s| s.to_string()),
        owned,
        client_id: req
            .header
            .client_id
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default(),
        client_host: format!("/{}", session.peer.ip()),
    };
    match state.groups.consumer_heartbeat(hb, &topics) {
        Err(e) => {
            let message = match &e {
                groups::GroupError::InvalidRequest(m) => Some(m.clone()),
                other => Some(other.to_string()),
            };
            refuse(group_error(&e).counted(), message)
        }
        Ok(r) => {
            let assignment = r
                .assignment
                .map(|a| Assignment::default().with_topic_partitions(to_wire(&a, &topics)));
            encode(
                &ConsumerGroupHeartbeatResponse::default()
                    .with_error_code(errors::NONE)
                    .with_member_id(Some(StrBytes::from_string(r.member_id)))
                    .with_member_epoch(r.member_epoch)
                    .with_heartbeat_interval_ms(r.heartbeat_interval_ms)
                    .with_assignment(assignment),
                v,
            )
        }
    }
}

/// An assignment by topic name as the wire has it (by topic id).
fn to_wire(a: &groups::Assignment, topics: &TopicsSnapshot) -> Vec<TopicPartitions> {
    let by_id: BTreeMap<Uuid, Vec<i32>> = a
        .iter()
        .filter_map(|(name, ps)| {
            let meta = topics.get(name)?;
            Some((meta.id, ps.iter().copied().collect()))
        })
        .collect();
    by_id
        .into_iter()
        .map(|(id, ps)| {
            TopicPartitions::default()
                .with_topic_id(id)
                .with_partitions(ps)
        })
        .collect()
}
