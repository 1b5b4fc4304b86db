//! TxnOffsetCommit (28): consumer offsets committed inside a transaction
//! (`sendOffsetsToTransaction`): held by the transaction coordinator and committed to the
//! group only if the transaction commits; an abort drops them. v3+ carry the consumer's
//! member id and generation (KIP-447), checked against the group as Kafka does.
//!
//! As Kafka: Write on the transactional id, Read on the group (else every partition gets
//! the error), Read on each topic (TOPIC_AUTHORIZATION_FAILED for that partition).

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, TopicName, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use nagare_core::security::{Operation, ResourceType};
use nagare_core::transactions::PendingOffset;

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, txn_error, ResponseError};
use crate::meters::Counted;
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::TxnOffsetCommit,
    advertised: (0, 4),
    accepted: (0, 4),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: TxnOffsetCommitRequest = decode(&req)?;
    let id = request.transactional_id.as_str();
    let group = request.group_id.as_str();
    let whole = if !session.allowed(Operation::Write, ResourceType::TransactionalId, id) {
        Some(ResponseError::TransactionalIdAuthorizationFailed)
    } else if !session.group_allowed(Operation::Read, group) {
        Some(ResponseError::GroupAuthorizationFailed)
    } else if group.is_empty() {
        Some(ResponseError::InvalidGroupId)
    } else {
        None
    };
    // Per partition: its error, or None while it is to be committed.
    let mut codes: Vec<(String, i32, Option<i16>)> = Vec::new();
    let mut offsets = Vec::new();
    for topic in &request.topics {
        let name = topic.name.to_string();
        let allowed = whole.is_none() && session.topic_allowed(Operation::Read, &name);
        for p in &topic.partitions {
            let code = if let Some(e) = whole {
                Some(e.counted())
            } else if !allowed {
                Some(ResponseError::TopicAuthorizationFailed.counted())
            } else if state.broker.partition(&name, p.partition_index).is_err() {
                Some(ResponseError::UnknownTopicOrPartition.counted())
            } else {
                offsets.push(PendingOffset {
                    group: group.to_string(),
                    topic: name.clone(),
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                });
                None
            };
            codes.push((name.clone(), p.partition_index, code));
        }
    }
    let outcome = if offsets.is_empty() {
        errors::NONE
    } else {
        let member = request.member_id.as_str();
        let instance = request.group_instance_id.as_deref();
        match state
            .transactions
            .txn_offset_commit(
                id,
                request.producer_id.0,
                request.producer_epoch,
                group,
                member,
                instance,
                request.generation_id,
                offsets,
            )
            .await
        {
            Ok(()) => errors::NONE,
            // PRODUCER_FENCED exists from v2 on, TRANSACTION_ABORTABLE from v4.
            Err(e) => txn_error(&e, req.version >= 2, req.version >= 4).counted(),
        }
    };
    let mut topics: BTreeMap<String, Vec<TxnOffsetCommitResponsePartition>> = BTreeMap::new();
    for (topic, partition, code) in codes {
        topics.entry(topic).or_default().push(
            TxnOffsetCommitResponsePartition::default()
                .with_partition_index(partition)
                .with_error_code(code.unwrap_or(outcome)),
        );
    }
    let response = TxnOffsetCommitResponse::default().with_topics(
        topics
            .into_iter()
            .map(|(name, partitions)| {
                TxnOffsetCommitResponseTopic::default()
                    .with_name(TopicName(str_bytes(name)))
                    .with_partitions(partitions)
            })
            .collect(),
    );
    encode(&response, req.version)
}
