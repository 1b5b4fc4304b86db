//! OffsetCommit (8): stores committed offsets (with their `metadata`) after the group's
//! generation and member checks; answered once they are in the internal log.

use crate::meters::Counted;
use std::sync::Arc;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ApiKey, OffsetCommitRequest, OffsetCommitResponse};
use nagare_core::groups::{self, GroupError, OffsetCommit};
use nagare_core::security::Operation;

use super::{decode, encode, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, group_error, ResponseError};
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::OffsetCommit,
    advertised: (2, 9),
    accepted: (2, 9),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: OffsetCommitRequest = decode(&req)?;
    // Per partition: Ok(index into the commit) or the error it gets without committing.
    let mut slots: Vec<Vec<Result<usize, i16>>> = Vec::with_capacity(request.topics.len());
    let mut commits = Vec::new();
    // Read on the group refuses every partition at once (Kafka's whole-request error);
    // then Read on each topic, checked before the topic's existence.
    let group_allowed = session.group_allowed(Operation::Read, &request.group_id);
    for t in &request.topics {
        if !group_allowed || !session.topic_allowed(Operation::Read, &t.name) {
            let code = if group_allowed {
                ResponseError::TopicAuthorizationFailed.counted()
            } else {
                ResponseError::GroupAuthorizationFailed.counted()
            };
            slots.push(t.partitions.iter().map(|_| Err(code)).collect());
            continue;
        }
        let count = state
            .broker
            .topic(&t.name.0)
            .map_or(0, |topic| topic.partition_count() as i32);
        let mut row = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            if p.partition_index < 0 || p.partition_index >= count {
                row.push(Err(ResponseError::UnknownTopicOrPartition.counted()));
                continue;
            }
            row.push(Ok(commits.len()));
            commits.push(OffsetCommit {
                topic: t.name.0.to_string(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
            });
        }
        slots.push(row);
    }
    let results: Result<Vec<Result<(), GroupError>>, GroupError> = if commits.is_empty() {
        Ok(Vec::new())
    } else {
        state
            .groups
            .commit_offsets(groups::OffsetCommitRequest {
                group_id: request.group_id.0.to_string(),
                member_id: request.member_id.to_string(),
                group_instance_id: request.group_instance_id.as_ref().map(|s| s.to_string()),
                generation: request.generation_id_or_member_epoch,
                offsets: commits,
            })
            .await
    };
    let code_of = |slot: &Result<usize, i16>| match (slot, &results) {
        (Err(c), _) => *c,
        (Ok(_), Err(e)) => group_error(e).counted(),
        (Ok(i), Ok(r)) => match r.get(*i) {
            Some(Ok(())) => errors::NONE,
            Some(Err(e)) => group_error(e).counted(),
            None => ResponseError::UnknownServerError.counted(),
        },
    };
    let topics = request
        .topics
        .iter()
        .zip(&slots)
        .map(|(t, row)| {
            OffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .zip(row)
                        .map(|(p, slot)| {
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code_of(slot))
                        })
                        .collect(),
                )
        })
        .collect();
    encode(
        &OffsetCommitResponse::default().with_topics(topics),
        req.version,
    )
}
