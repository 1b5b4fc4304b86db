//! Heartbeat (12): keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to
//! rejoin.

use crate::meters::Counted;
use std::sync::Arc;

use kafka_protocol::messages::{ApiKey, HeartbeatRequest, HeartbeatResponse};
use nagare_core::security::Operation;

use super::{decode, encode, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, group_error, ResponseError};
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::Heartbeat,
    advertised: (0, 4),
    accepted: (0, 4),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: HeartbeatRequest = decode(&req)?;
    let error = if !session.group_allowed(Operation::Read, &request.group_id) {
        ResponseError::GroupAuthorizationFailed.counted()
    } else {
        match state.groups.heartbeat(
            &request.group_id.0,
            &request.member_id,
            request.group_instance_id.as_deref(),
            request.generation_id,
        ) {
            Ok(()) => errors::NONE,
            Err(e) => group_error(&e).counted(),
        }
    };
    encode(
        &HeartbeatResponse::default().with_error_code(error),
        req.version,
    )
}
