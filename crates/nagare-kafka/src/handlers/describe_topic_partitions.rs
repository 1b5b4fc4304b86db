//! DescribeTopicPartitions (75, KIP-966): the partitions of the topics named (every topic
//! the client may describe when none is named), sorted by topic name, at most
//! `response_partition_limit` partitions per response, with a cursor to continue from.
//! Kafka's internal topics are included with `is_internal = true` (`internal_topics.rs`).

use crate::meters::Counted;
use std::sync::Arc;

use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use nagare_core::security::{Operation, ResourceType};

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, ResponseError};
use crate::internal_topics;
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::DescribeTopicPartitions,
    advertised: (0, 0),
    accepted: (0, 0),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

/// Kafka's default `max.request.partition.size.limit`.
const MAX_PARTITIONS: i32 = 2000;

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: DescribeTopicPartitionsRequest = decode(&req)?;
    let broker = &state.broker;
    let node = BrokerId(state.node_id());
    let mut names: Vec<String> = if request.topics.is_empty() {
        let internal = internal_topics::all(broker).into_iter().map(|t| t.name);
        broker
            .list_topics()
            .iter()
            .map(|t| t.name().to_string())
            .chain(internal.map(str::to_string))
            .filter(|name| session.topic_allowed(Operation::Describe, name))
            .collect()
    } else {
        request.topics.iter().map(|t| t.name.to_string()).collect()
    };
    names.sort();
    names.dedup();
    let (cursor_topic, cursor_partition) = match &request.cursor {
        Some(c) => (Some(c.topic_name.to_string()), c.partition_index.max(0)),
        None => (None, 0),
    };
    let mut budget = if request.response_partition_limit > 0 {
        request.response_partition_limit.min(MAX_PARTITIONS)
    } else {
        MAX_PARTITIONS
    };
    let mut topics = Vec::new();
    let mut next_cursor = None;
    for name in names {
        if cursor_topic.as_ref().is_some_and(|c| name < *c) {
            continue;
        }
        let first = if cursor_topic.as_deref() == Some(name.as_str()) {
            cursor_partition
        } else {
            0
        };
        let answer = DescribeTopicPartitionsResponseTopic::default()
            .with_name(Some(TopicName(str_bytes(name.clone()))))
            .with_topic_authorized_operations(i32::MIN);
        if !session.topic_allowed(Operation::Describe, &name) {
            topics.push(answer.with_error_code(ResponseError::TopicAuthorizationFailed.counted()));
            continue;
        }
        // (id, partitions, internal)
        let found = match internal_topics::by_name(broker, &name) {
            Some(t) => Some((t.id, 1, true)),
            None => broker
                .topic(&name)
                .map(|t| (t.id(), t.partition_count() as i32, false)),
        };
        let Some((id, count, internal)) = found else {
            topics.push(answer.with_error_code(ResponseError::UnknownTopicOrPartition.counted()));
            continue;
        };
        if budget == 0 {
            next_cursor = Some(
                Cursor::default()
                    .with_topic_name(TopicName(str_bytes(name)))
                    .with_partition_index(first),
            );
            break;
        }
        let last = count.min(first.saturating_add(budget));
        let partitions: Vec<_> = (first..last)
            .map(|i| {
                DescribeTopicPartitionsResponsePartition::default()
                    .with_error_code(errors::NONE)
                    .with_partition_index(i)
                    .with_leader_id(node)
                    .with_leader_epoch(0)
                    .with_replica_nodes(vec![node])
                    .with_isr_nodes(vec![node])
                    .with_eligible_leader_replicas(Some(Vec::new()))
                    .with_last_known_elr(Some(Vec::new()))
                    .with_offline_replicas(Vec::new())
            })
            .collect();
        budget -= last - first;
        topics.push(
            answer
                .with_error_code(errors::NONE)
                .with_topic_id(id)
                .with_is_internal(internal)
                .with_partitions(partitions)
                .with_topic_authorized_operations(
                    session.authorized_operations(ResourceType::Topic, &name),
                ),
        );
        if last < count {
            next_cursor = Some(
                Cursor::default()
                    .with_topic_name(TopicName(str_bytes(name)))
                    .with_partition_index(last),
            );
            break;
        }
    }
    encode(
        &DescribeTopicPartitionsResponse::default()
            .with_topics(topics)
            .with_next_cursor(next_cursor),
        req.version,
    )
}
