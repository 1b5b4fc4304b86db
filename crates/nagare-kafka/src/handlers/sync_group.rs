//! SyncGroup (14): the leader's assignment, relayed byte for byte to each member.

use crate::meters::Counted;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, SyncGroupRequest, SyncGroupResponse};
use nagare_core::groups::SyncRequest;
use nagare_core::security::Operation;

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{group_error, ResponseError};
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::SyncGroup,
    advertised: (0, 5),
    accepted: (0, 5),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: SyncGroupRequest = decode(&req)?;
    if !session.group_allowed(Operation::Read, &request.group_id) {
        let response = SyncGroupResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.counted())
            .with_assignment(Bytes::new());
        return encode(&response, req.version);
    }
    let sync = SyncRequest {
        group_id: request.group_id.0.to_string(),
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.as_ref().map(|s| s.to_string()),
        generation: request.generation_id,
        protocol_type: request.protocol_type.as_ref().map(|s| s.to_string()),
        protocol_name: request.protocol_name.as_ref().map(|s| s.to_string()),
        assignments: request
            .assignments
            .iter()
            .map(|a| (a.member_id.to_string(), a.assignment.clone()))
            .collect(),
    };
    let v5 = req.version >= 5;
    let response = match state.groups.sync(sync).await {
        Ok(s) => SyncGroupResponse::default()
            .with_protocol_type(s.protocol_type.filter(|_| v5).map(str_bytes))
            .with_protocol_name(s.protocol_name.filter(|_| v5).map(str_bytes))
            .with_assignment(s.assignment),
        Err(e) => SyncGroupResponse::default()
            .with_error_code(group_error(&e).counted())
            .with_assignment(Bytes::new()),
    };
    encode(&response, req.version)
}
