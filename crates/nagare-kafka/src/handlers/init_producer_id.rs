//! InitProducerId (22): producer ids and epochs for idempotent producers (persisted by
//! `nagare_core::producers`). Transactional ids are refused: transactions are not
//! implemented (and their APIs are not advertised).

use std::sync::Arc;

use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::{decode, encode, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, produce_error, ResponseError};
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::InitProducerId,
    advertised: (0, 5),
    accepted: (0, 5),
    call: |state, _session, req| Box::pin(handle(state, req)),
};

async fn handle(state: Arc<KafkaState>, req: ParsedRequest) -> Result<Reply, KafkaError> {
    let request: InitProducerIdRequest = decode(&req)?;
    let response = InitProducerIdResponse::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let response = if request
        .transactional_id
        .as_ref()
        .is_some_and(|t| !t.is_empty())
    {
        response.with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code())
    } else {
        let current = (request.producer_id.0 >= 0 && request.producer_epoch >= 0)
            .then_some((request.producer_id.0, request.producer_epoch));
        match state.producers.init_producer_id(current).await {
            Ok((id, epoch)) => response
                .with_error_code(errors::NONE)
                .with_producer_id(ProducerId(id))
                .with_producer_epoch(epoch),
            Err(e) => response.with_error_code(produce_error(&e).code()),
        }
    };
    encode(&response, req.version)
}
