//! DescribeGroups (15): state, protocol and members of groups; an unknown group is shown
//! as Dead with no members (as Kafka does up to v5).

use crate::meters::Counted;
use std::sync::Arc;

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{ApiKey, DescribeGroupsRequest, DescribeGroupsResponse};
use nagare_core::security::{Operation, ResourceType};

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::ResponseError;
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::DescribeGroups,
    advertised: (0, 5),
    accepted: (0, 5),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: DescribeGroupsRequest = decode(&req)?;
    let v = req.version;
    let groups = request
        .groups
        .iter()
        .map(|id| {
            if !session.group_allowed(Operation::Describe, id) {
                // Kafka's `groupError`: empty state, protocol and members.
                return DescribedGroup::default()
                    .with_group_id(id.clone())
                    .with_error_code(ResponseError::GroupAuthorizationFailed.counted());
            }
            let mut d = state.groups.describe_group(id);
            if d.group_type == "consumer" {
                // Not a classic group: Kafka shows it as Dead here
                // (ConsumerGroupDescribe describes it).
                d.state = nagare_core::groups::GroupState::Dead;
                d.protocol_type.clear();
                d.protocol_name.clear();
                d.members.clear();
            }
            let mut group = DescribedGroup::default()
                .with_group_id(id.clone())
                .with_group_state(str_bytes(d.state.as_str()))
                .with_protocol_type(str_bytes(d.protocol_type))
                .with_protocol_data(str_bytes(d.protocol_name))
                .with_members(
                    d.members
                        .into_iter()
                        .map(|m| {
                            DescribedGroupMember::default()
                                .with_member_id(str_bytes(m.member_id))
                                .with_group_instance_id(if v >= 4 {
                                    m.group_instance_id.map(str_bytes)
                                } else {
                                    None
                                })
                                .with_client_id(str_bytes(m.client_id))
                                .with_client_host(str_bytes(m.client_host))
                                .with_member_metadata(m.metadata)
                                .with_member_assignment(m.assignment)
                        })
                        .collect(),
                );
            if v >= 3 && request.include_authorized_operations {
                group.authorized_operations =
                    session.authorized_operations(ResourceType::Group, id);
            }
            group
        })
        .collect();
    encode(&DescribeGroupsResponse::default().with_groups(groups), v)
}
