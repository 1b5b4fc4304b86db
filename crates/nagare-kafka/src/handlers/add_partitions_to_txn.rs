//! AddPartitionsToTxn (24): partitions join the producer's open transaction (starting it).
//! v0-3 carry one transactional id (what clients send); v4+ batch several and may only
//! *verify* that partitions are in their transaction (KIP-890, sent by brokers).
//!
//! As Kafka: v0-3 need Write on the transactional id (else every partition gets
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and Write on each topic; v4+ need ClusterAction
//! (else CLUSTER_AUTHORIZATION_FAILED for the whole request). One refused or unknown
//! partition fails the whole transaction's request: its own error, and
//! OPERATION_NOT_ATTEMPTED for the others.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, TopicName, TransactionalId,
};
use nagare_core::security::{Operation, ResourceType};

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, txn_error, ResponseError};
use crate::meters::Counted;
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::AddPartitionsToTxn,
    advertised: (0, 5),
    accepted: (0, 5),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: AddPartitionsToTxnRequest = decode(&req)?;
    let version = req.version;
    if version < 4 {
        let txn = AddPartitionsToTxnTransaction::default()
            .with_transactional_id(request.v3_and_below_transactional_id)
            .with_producer_id(request.v3_and_below_producer_id)
            .with_producer_epoch(request.v3_and_below_producer_epoch)
            .with_topics(request.v3_and_below_topics);
        let result = one_transaction(&state, &session, txn, version).await;
        let response = AddPartitionsToTxnResponse::default()
            .with_results_by_topic_v3_and_below(result.topic_results);
        return encode(&response, version);
    }
    let mut response = AddPartitionsToTxnResponse::default().with_error_code(errors::NONE);
    if !session.cluster_allowed(Operation::ClusterAction) {
        response.error_code = ResponseError::ClusterAuthorizationFailed.counted();
        return encode(&response, version);
    }
    for txn in request.transactions {
        let result = one_transaction(&state, &session, txn, version).await;
        response.results_by_transaction.push(result);
    }
    encode(&response, version)
}

async fn one_transaction(
    state: &KafkaState,
    session: &Session,
    txn: AddPartitionsToTxnTransaction,
    version: i16,
) -> AddPartitionsToTxnResult {
    let id = txn.transactional_id.to_string();
    let partitions: Vec<(String, i32)> = txn
        .topics
        .iter()
        .flat_map(|t: &AddPartitionsToTxnTopic| {
            let name = t.name.to_string();
            t.partitions.iter().map(move |p| (name.clone(), *p))
        })
        .collect();
    let uniform = |code: i16| partitions.iter().map(|p| (p.clone(), code)).collect();
    let codes: Vec<((String, i32), i16)> =
        if version < 4 && !session.allowed(Operation::Write, ResourceType::TransactionalId, &id) {
            uniform(ResponseError::TransactionalIdAuthorizationFailed.counted())
        } else if let Some(failed) = check_partitions(state, session, &partitions, version) {
            failed
        } else if txn.verify_only {
            match state.transactions.verify_partitions(
                &id,
                txn.producer_id.0,
                txn.producer_epoch,
                &partitions,
            ) {
                Ok(inside) => partitions
                    .iter()
                    .zip(inside)
                    .map(|(p, inside)| {
                        let code = if inside {
                            errors::NONE
                        } else {
                            txn_error(
                                &nagare_core::transactions::TxnError::TransactionAbortable,
                                true,
                                version >= 5,
                            )
                            .counted()
                        };
                        (p.clone(), code)
                    })
                    .collect(),
                Err(e) => uniform(txn_error(&e, true, version >= 5).counted()),
            }
        } else {
            let code = match state
                .transactions
                .add_partitions(&id, txn.producer_id.0, txn.producer_epoch, &partitions)
                .await
            {
                Ok(()) => errors::NONE,
                // PRODUCER_FENCED exists from v2 on.
                Err(e) => txn_error(&e, version >= 2, version >= 5).counted(),
            };
            uniform(code)
        };
    AddPartitionsToTxnResult::default()
        .with_transactional_id(TransactionalId(str_bytes(id)))
        .with_topic_results(by_topic(codes))
}

/// Write on each topic (v0-3) and existence of each partition; `None` when all pass.
fn check_partitions(
    state: &KafkaState,
    session: &Session,
    partitions: &[(String, i32)],
    version: i16,
) -> Option<Vec<((String, i32), i16)>> {
    let mut failed = false;
    let checked: Vec<((String, i32), Option<ResponseError>)> = partitions
        .iter()
        .map(|(topic, p)| {
            let error = if version < 4 && !session.topic_allowed(Operation::Write, topic) {
                Some(ResponseError::TopicAuthorizationFailed)
            } else if state.broker.partition(topic, *p).is_err() {
                Some(ResponseError::UnknownTopicOrPartition)
            } else {
                None
            };
            failed |= error.is_some();
            ((topic.clone(), *p), error)
        })
        .collect();
    failed.then(|| {
        checked
            .into_iter()
            .map(|(p, e)| {
                let code = e.unwrap_or(ResponseError::OperationNotAttempted).counted();
                (p, code)
            })
            .collect()
    })
}

fn by_topic(codes: Vec<((String, i32), i16)>) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut topics: BTreeMap<String, Vec<AddPartitionsToTxnPartitionResult>> = BTreeMap::new();
    for ((topic, partition), code) in codes {
        topics.entry(topic).or_default().push(
            AddPartitionsToTxnPartitionResult::default()
                .with_partition_index(partition)
                .with_partition_error_code(code),
        );
    }
    topics
        .into_iter()
        .map(|(name, results)| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(TopicName(str_bytes(name)))
                .with_results_by_partition(results)
        })
        .collect()
}
