//! AddOffsetsToTxn (25): a consumer group joins the producer's transaction, so that
//! TxnOffsetCommit may then commit its offsets in it (Kafka adds the group's
//! `__consumer_offsets` partition; here the coordinator records the group).
//!
//! As Kafka: Write on the transactional id, then Read on the group.

use std::sync::Arc;

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, ApiKey};
use nagare_core::security::{Operation, ResourceType};

use super::{decode, encode, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, txn_error, ResponseError};
use crate::meters::Counted;
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::AddOffsetsToTxn,
    advertised: (0, 4),
    accepted: (0, 4),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: AddOffsetsToTxnRequest = decode(&req)?;
    let id = request.transactional_id.as_str();
    let group = request.group_id.as_str();
    let code = if !session.allowed(Operation::Write, ResourceType::TransactionalId, id) {
        ResponseError::TransactionalIdAuthorizationFailed.counted()
    } else if !session.group_allowed(Operation::Read, group) {
        ResponseError::GroupAuthorizationFailed.counted()
    } else if group.is_empty() {
        ResponseError::InvalidGroupId.counted()
    } else {
        match state
            .transactions
            .add_offsets(id, request.producer_id.0, request.producer_epoch, group)
            .await
        {
            Ok(()) => errors::NONE,
            // PRODUCER_FENCED exists from v2 on.
            Err(e) => txn_error(&e, req.version >= 2, false).counted(),
        }
    };
    encode(
        &AddOffsetsToTxnResponse::default().with_error_code(code),
        req.version,
    )
}
