//! Metadata (3): one broker (us, at the advertised address), which leads every partition.
//! A null topic list means every topic, an empty one none (v0: empty means every topic);
//! unknown topics are created when the client and the broker allow it.

use std::sync::Arc;

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{ApiKey, BrokerId, MetadataRequest, MetadataResponse, TopicName};
use nagare_core::{CoreError, Topic};
use uuid::Uuid;

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{core_error, ResponseError};
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::Metadata,
    advertised: (0, 12),
    accepted: (0, 12),
    call: |state, _session, req| Box::pin(handle(state, req)),
};

async fn handle(state: Arc<KafkaState>, req: ParsedRequest) -> Result<Reply, KafkaError> {
    let request: MetadataRequest = decode(&req)?;
    let broker = &state.broker;
    let all = match &request.topics {
        None => true,
        Some(t) => t.is_empty() && req.version == 0,
    };
    let auto_create = req.version < 4 || request.allow_auto_topic_creation;
    let node = BrokerId(state.node_id());
    let mut topics = Vec::new();
    if all {
        for t in broker.list_topics() {
            topics.push(describe(&t, node, req.version));
        }
    } else {
        for wanted in request.topics.iter().flatten() {
            let found = match &wanted.name {
                Some(name) => {
                    let name: &str = name;
                    let result = if auto_create {
                        broker.topic_or_create(name)
                    } else {
                        broker
                            .topic(name)
                            .ok_or_else(|| CoreError::UnknownTopic(name.to_string()))
                    };
                    result.map_err(|e| (core_error(&e).code(), Some(name.to_string()), Uuid::nil()))
                }
                None => broker
                    .list_topics()
                    .into_iter()
                    .find(|t| t.id() == wanted.topic_id)
                    .ok_or((ResponseError::UnknownTopicId.code(), None, wanted.topic_id)),
            };
            topics.push(match found {
                Ok(t) => describe(&t, node, req.version),
                Err((error_code, name, id)) => MetadataResponseTopic::default()
                    .with_error_code(error_code)
                    .with_name(name.map(|n| TopicName(str_bytes(n))))
                    .with_topic_id(if req.version >= 10 { id } else { Uuid::nil() }),
            });
        }
    }
    let response = MetadataResponse::default()
        .with_brokers(vec![MetadataResponseBroker::default()
            .with_node_id(node)
            .with_host(str_bytes(state.advertised_host.clone()))
            .with_port(state.advertised_port)])
        .with_cluster_id((req.version >= 2).then(|| str_bytes(broker.cluster_id())))
        .with_controller_id(if req.version >= 1 { node } else { BrokerId(-1) })
        .with_topics(topics);
    encode(&response, req.version)
}

fn describe(topic: &Topic, node: BrokerId, version: i16) -> MetadataResponseTopic {
    let partitions = topic
        .partitions()
        .iter()
        .map(|p| {
            MetadataResponsePartition::default()
                .with_partition_index(p.index())
                .with_leader_id(node)
                .with_leader_epoch(if version >= 7 { 0 } else { -1 })
                .with_replica_nodes(vec![node])
                .with_isr_nodes(vec![node])
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(str_bytes(topic.name()))))
        .with_topic_id(if version >= 10 {
            topic.id()
        } else {
            Uuid::nil()
        })
        .with_partitions(partitions)
}
