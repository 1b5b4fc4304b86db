//! InitProducerId (22): producer ids and epochs for idempotent producers (persisted by
//! `nagare_core::producers`). Transactional ids are refused: transactions are not
//! implemented (and their APIs are not advertised).
//!
//! Authorization as in Kafka 3+: a transactional id needs Write on it; an idempotent
//! producer needs IdempotentWrite on the cluster or Write on at least one topic.

use crate::meters::Counted;
use std::sync::Arc;

use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use nagare_core::security::{Operation, ResourceType};

use super::{decode, encode, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, produce_error, ResponseError};
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
    let response = if transactional_id.is_some() {
        // Refused whether or not Write on the id is granted; either way the answer is
        // TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which is what Kafka says when it is not.
        response.with_error_code(ResponseError::TransactionalIdAuthorizationFailed.counted())
    } else if !session.cluster_allowed(Operation::IdempotentWrite)
        && !session.allowed_on_any(Operation::Write, ResourceType::Topic)
    {
        response.with_error_code(ResponseError::ClusterAuthorizationFailed.counted())
    } else {
        let current = (request.producer_id.0 >= 0 && request.producer_epoch >= 0)
            .then_some((request.producer_id.0, request.producer_epoch));
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
