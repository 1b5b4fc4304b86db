//! EndTxn (26): commits or aborts the producer's transaction. Answered once the decision
//! is stored; the markers are written (and committed offsets handed to their groups)
//! before the answer too unless a partition refuses, in which case they are retried in
//! the background, as Kafka's coordinator does.
//!
//! Versions 0-4 (transaction version 1). v5 bumps the epoch at every end (KIP-890 part 2),
//! which clients only use once the cluster finalizes `transaction.version` 2; this broker
//! does not, so v5 is not advertised.
//!
//! As Kafka: Write on the transactional id.

use std::sync::Arc;

use kafka_protocol::messages::{ApiKey, EndTxnRequest, EndTxnResponse, ProducerId};
use nagare_core::security::{Operation, ResourceType};

use super::{decode, encode, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, txn_error, ResponseError};
use crate::meters::Counted;
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::EndTxn,
    advertised: (0, 4),
    accepted: (0, 4),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: EndTxnRequest = decode(&req)?;
    let id = request.transactional_id.as_str();
    let code = if !session.allowed(Operation::Write, ResourceType::TransactionalId, id) {
        ResponseError::TransactionalIdAuthorizationFailed.counted()
    } else {
        match state
            .transactions
            .end_txn(
                id,
                request.producer_id.0,
                request.producer_epoch,
                request.committed,
            )
            .await
        {
            Ok(()) => errors::NONE,
            // PRODUCER_FENCED exists from v2 on, TRANSACTION_ABORTABLE from v4.
            Err(e) => txn_error(&e, req.version >= 2, req.version >= 4).counted(),
        }
    };
    let response = EndTxnResponse::default()
        .with_error_code(code)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    encode(&response, req.version)
}
