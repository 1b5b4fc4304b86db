//! JoinGroup (11): joins a member to a group and waits for the rebalance to complete
//! (MEMBER_ID_REQUIRED first for new dynamic members at v4+; static members at v5+).

use std::sync::Arc;

use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{ApiKey, JoinGroupRequest, JoinGroupResponse};
use nagare_core::groups::{GroupError, JoinRequest, Protocol};

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::group_error;
use crate::{KafkaError, KafkaState, Reply};

pub const HANDLER: Handler = Handler {
    key: ApiKey::JoinGroup,
    advertised: (0, 9),
    accepted: (0, 9),
    call: |state, req| Box::pin(handle(state, req)),
};

async fn handle(state: Arc<KafkaState>, req: ParsedRequest) -> Result<Reply, KafkaError> {
    let request: JoinGroupRequest = decode(&req)?;
    let join = JoinRequest {
        group_id: request.group_id.0.to_string(),
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.as_ref().map(|s| s.to_string()),
        client_id: req
            .header
            .client_id
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default(),
        client_host: "/127.0.0.1".to_string(),
        session_timeout_ms: request.session_timeout_ms,
        // v0 has no rebalance timeout: the session timeout bounds the rebalance.
        rebalance_timeout_ms: if req.version == 0 {
            request.session_timeout_ms
        } else {
            request.rebalance_timeout_ms
        },
        protocol_type: request.protocol_type.to_string(),
        protocols: request
            .protocols
            .iter()
            .map(|p| Protocol {
                name: p.name.to_string(),
                metadata: p.metadata.clone(),
            })
            .collect(),
        require_known_member_id: req.version >= 4,
    };
    let response = match state.groups.join(join).await {
        Ok(j) => JoinGroupResponse::default()
            .with_generation_id(j.generation)
            .with_protocol_type(if req.version >= 7 {
                j.protocol_type.map(str_bytes)
            } else {
                None
            })
            .with_protocol_name(Some(str_bytes(j.protocol_name.unwrap_or_default())))
            .with_leader(str_bytes(j.leader))
            .with_member_id(str_bytes(j.member_id))
            .with_members(
                j.members
                    .into_iter()
                    .map(|m| {
                        JoinGroupResponseMember::default()
                            .with_member_id(str_bytes(m.member_id))
                            .with_group_instance_id(if req.version >= 5 {
                                m.group_instance_id.map(str_bytes)
                            } else {
                                None
                            })
                            .with_metadata(m.metadata)
                    })
                    .collect(),
            ),
        Err(e) => {
            let member_id = match &e {
                GroupError::MemberIdRequired(id) => str_bytes(id.clone()),
                _ => request.member_id.clone(),
            };
            JoinGroupResponse::default()
                .with_error_code(group_error(&e).code())
                .with_generation_id(-1)
                .with_member_id(member_id)
        }
    };
    encode(&response, req.version)
}
