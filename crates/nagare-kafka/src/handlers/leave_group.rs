//! LeaveGroup (13): members leave at once instead of timing out (one member up to v2,
//! a batch of members, possibly static ones by instance id, from v3).

use crate::meters::Counted;
use std::sync::Arc;

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{ApiKey, LeaveGroupRequest, LeaveGroupResponse};
use nagare_core::groups::LeavingMember;
use nagare_core::security::Operation;

use super::{decode, encode, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, group_error, ResponseError};
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::LeaveGroup,
    advertised: (0, 5),
    accepted: (0, 5),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: LeaveGroupRequest = decode(&req)?;
    let leaving: Vec<LeavingMember> = if req.version >= 3 {
        request
            .members
            .iter()
            .map(|m| LeavingMember {
                member_id: m.member_id.to_string(),
                group_instance_id: m.group_instance_id.as_ref().map(|s| s.to_string()),
            })
            .collect()
    } else {
        vec![LeavingMember {
            member_id: request.member_id.to_string(),
            group_instance_id: None,
        }]
    };
    let mut response = LeaveGroupResponse::default();
    if !session.group_allowed(Operation::Read, &request.group_id) {
        response.error_code = ResponseError::GroupAuthorizationFailed.counted();
        return encode(&response, req.version);
    }
    match state.groups.leave(&request.group_id.0, &leaving) {
        Err(e) => response.error_code = group_error(&e).counted(),
        Ok(results) if req.version >= 3 => {
            response.members = request
                .members
                .iter()
                .zip(results)
                .map(|(m, r)| {
                    MemberResponse::default()
                        .with_member_id(m.member_id.clone())
                        .with_group_instance_id(m.group_instance_id.clone())
                        .with_error_code(
                            r.err().map_or(errors::NONE, |e| group_error(&e).counted()),
                        )
                })
                .collect();
        }
        Ok(results) => {
            response.error_code = results
                .into_iter()
                .find_map(Result::err)
                .map_or(errors::NONE, |e| group_error(&e).counted());
        }
    }
    encode(&response, req.version)
}
