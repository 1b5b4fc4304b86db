//! DescribeTransactions (65): state, producer id and epoch, timeout, start time and
//! partitions of transactional ids (`kafka-transactions.sh describe`, Admin
//! `describeTransactions`).
//!
//! As Kafka: Describe on each transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED
//! for it); partitions of topics the client may not describe are left out.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    ApiKey, DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
};
use nagare_core::security::{Operation, ResourceType};

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, ResponseError};
use crate::meters::Counted;
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::DescribeTransactions,
    advertised: (0, 0),
    accepted: (0, 0),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: DescribeTransactionsRequest = decode(&req)?;
    let mut response = DescribeTransactionsResponse::default();
    for id in request.transactional_ids {
        let name = id.to_string();
        let mut answer = TransactionState::default()
            .with_transactional_id(id)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
            .with_transaction_start_time_ms(-1)
            .with_transaction_state(str_bytes(""));
        if !session.allowed(Operation::Describe, ResourceType::TransactionalId, &name) {
            answer.error_code = ResponseError::TransactionalIdAuthorizationFailed.counted();
        } else if name.is_empty() {
            answer.error_code = ResponseError::InvalidRequest.counted();
        } else if let Some(meta) = state
            .transactions
            .get(&name)
            .filter(|m| m.producer_epoch >= 0)
        {
            let mut topics: BTreeMap<String, Vec<i32>> = BTreeMap::new();
            for (topic, p) in &meta.partitions {
                if session.topic_allowed(Operation::Describe, topic) {
                    topics.entry(topic.clone()).or_default().push(*p);
                }
            }
            answer = answer
                .with_error_code(errors::NONE)
                .with_transaction_state(str_bytes(meta.state.name()))
                .with_transaction_timeout_ms(meta.timeout_ms)
                .with_transaction_start_time_ms(meta.start_ms)
                .with_producer_id(ProducerId(meta.producer_id))
                .with_producer_epoch(meta.producer_epoch)
                .with_topics(
                    topics
                        .into_iter()
                        .map(|(t, partitions)| {
                            TopicData::default()
                                .with_topic(TopicName(str_bytes(t)))
                                .with_partitions(partitions)
                        })
                        .collect(),
                );
        } else {
            answer.error_code = ResponseError::TransactionalIdNotFound.counted();
        }
        response.transaction_states.push(answer);
    }
    encode(&response, req.version)
}
