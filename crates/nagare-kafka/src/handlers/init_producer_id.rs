//! InitProducerId (22): producer ids and epochs for idempotent producers (persisted by
//! `nagare_core::producers`) and for transactional ids (by the transaction coordinator,
//! `nagare_core::transactions`: epoch bump, fencing of the previous producer, abort of
//! its open transaction, `transaction.timeout.ms` validation, KIP-360 recovery with the
//! current producer id and epoch).
//!
//! Authorization as in Kafka 3+: a transactional id needs Write on it; an idempotent
//! producer needs IdempotentWrite on the cluster or Write on at least one topic.

use crate::meters::Counted;
use std::sync::Arc;

use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use nagare_core::security::{Operation, ResourceType};

use super::{decode, encode, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, produce_error, txn_error, ResponseError};
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::InitProducerId,
    advertised: (0, 5),
    accepted: (0, 5),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: InitProducerIdRequest = decode(&req)?;
    let response = InitProducerIdResponse::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let transactional_id = request
        .transactional_id
        .as_deref()
        .filter(|t| !t.is_empty());
    // As Kafka: no id and no epoch, or both; one without the other is malformed.
    let current = match (request.producer_id.0, request.producer_epoch) {
        (-1, -1) => Ok(None),
        (id, epoch) if id >= 0 && epoch >= 0 => Ok(Some((id, epoch))),
        _ => Err(()),
    };
    let response = if let Some(id) = transactional_id {
        if !session.allowed(Operation::Write, ResourceType::TransactionalId, id) {
            response.with_error_code(ResponseError::TransactionalIdAuthorizationFailed.counted())
        } else if let Ok(current) = current {
            match state
                .transactions
                .init_producer_id(id, request.transaction_timeout_ms, current)
                .await
            {
                Ok((id, epoch)) => response
                    .with_error_code(errors::NONE)
                    .with_producer_id(ProducerId(id))
                    .with_producer_epoch(epoch),
                // PRODUCER_FENCED exists from v4 on.
                Err(e) => {
                    response.with_error_code(txn_error(&e, req.version >= 4, false).counted())
                }
            }
        } else {
            response.with_error_code(ResponseError::InvalidRequest.counted())
        }
    } else if !session.cluster_allowed(Operation::IdempotentWrite)
        && !session.allowed_on_any(Operation::Write, ResourceType::Topic)
    {
        response.with_error_code(ResponseError::ClusterAuthorizationFailed.counted())
    } else {
        let current = current.ok().flatten();
        match state.producers.init_producer_id(current).await {
            Ok((id, epoch)) => response
                .with_error_code(errors::NONE)
                .with_producer_id(ProducerId(id))
                .with_producer_epoch(epoch),
            Err(e) => response.with_error_code(produce_error(&e).counted()),
        }
    };
    encode(&response, req.version)
}
