//! ListOffsets (2): -1 latest (the last stable offset under `isolation_level=1`), -2
//! earliest, -3 the record with the largest timestamp (v7+), -4 earliest local (v8+,
//! the log start: everything is local), -5 latest tiered (v9+, -1: nothing is tiered),
//! otherwise the first offset at or after a timestamp (through the time index).
//! Kafka's internal topics answer from nagare's internal log (`internal_topics.rs`).

use crate::meters::Counted;
use std::sync::Arc;

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ApiKey, ListOffsetsRequest, ListOffsetsResponse};
use nagare_core::security::Operation;
use nagare_core::Partition;

use super::{decode, encode, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, core_error, ResponseError};
use crate::internal_topics;
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::ListOffsets,
    advertised: (1, 10),
    accepted: (1, 10),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;
/// `isolation_level` READ_COMMITTED.
const READ_COMMITTED: i8 = 1;

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: ListOffsetsRequest = decode(&req)?;
    let committed = request.isolation_level == READ_COMMITTED;
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            // Describe on the topic, checked before its existence (as Kafka does).
            let authorized = session.topic_allowed(Operation::Describe, &t.name);
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let answer = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index);
                    if !authorized {
                        return answer
                            .with_error_code(ResponseError::TopicAuthorizationFailed.counted())
                            .with_offset(-1)
                            .with_timestamp(-1);
                    }
                    match partition(&state, &t.name, p.partition_index) {
                        Ok(partition) => {
                            let (offset, timestamp) = lookup(&partition, p.timestamp, committed);
                            answer
                                .with_error_code(errors::NONE)
                                .with_offset(offset)
                                .with_timestamp(timestamp)
                                .with_leader_epoch(if req.version >= 4 { 0 } else { -1 })
                        }
                        Err(e) => answer
                            .with_error_code(core_error(&e).counted())
                            .with_offset(-1)
                            .with_timestamp(-1),
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    encode(
        &ListOffsetsResponse::default().with_topics(topics),
        req.version,
    )
}

/// A topic's partition, Kafka's internal topics included.
fn partition(
    state: &KafkaState,
    topic: &str,
    index: i32,
) -> Result<Arc<Partition>, nagare_core::CoreError> {
    match internal_topics::by_name(&state.broker, topic) {
        Some(t) if index == t.partition.index() => Ok(t.partition),
        Some(_) => Err(nagare_core::CoreError::UnknownPartition {
            topic: topic.to_string(),
            partition: index,
        }),
        None => state.broker.partition(topic, index),
    }
}

/// (offset, timestamp) for one query; (-1, -1) when nothing matches.
fn lookup(p: &Partition, timestamp: i64, committed: bool) -> (i64, i64) {
    match timestamp {
        LATEST if committed => (stable_offset(p), -1),
        LATEST => (p.high_watermark(), -1),
        LATEST_TIERED => (-1, -1),
        EARLIEST | EARLIEST_LOCAL => (p.log_start_offset(), -1),
        MAX_TIMESTAMP => match p.max_timestamp() {
            Some((ts, offset)) => (offset, ts),
            None => (-1, -1),
        },
        ts if ts >= 0 => match p.offset_for_timestamp(ts) {
            Some((offset, found_ts)) => (offset, found_ts),
            None => (-1, -1),
        },
        _ => (-1, -1),
    }
}

/// The offset a read_committed consumer may read up to.
fn stable_offset(p: &Partition) -> i64 {
    p.last_stable_offset()
}
