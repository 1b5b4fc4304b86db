//! ListGroups (16): every group with its protocol type and state (filters from v4/v5).

use std::sync::Arc;

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{ApiKey, GroupId, ListGroupsRequest, ListGroupsResponse};
use nagare_core::security::Operation;

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::ListGroups,
    advertised: (0, 5),
    accepted: (0, 5),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: ListGroupsRequest = decode(&req)?;
    let v = req.version;
    let states: Vec<String> = request
        .states_filter
        .iter()
        .map(|s| s.to_lowercase())
        .collect();
    let types: Vec<String> = request
        .types_filter
        .iter()
        .map(|t| t.to_lowercase())
        .collect();
    let type_ok = |t: &str| types.is_empty() || types.iter().any(|x| x == t);
    // Describe on the cluster lists every group; otherwise only those the client may
    // describe.
    let all = session.cluster_allowed(Operation::Describe);
    let mut groups: Vec<ListedGroup> = state
        .groups
        .list_groups()
        .into_iter()
        .filter(|g| {
            type_ok(g.group_type)
                && (states.is_empty() || states.contains(&g.state_name.to_lowercase()))
        })
        .filter(|g| all || session.group_allowed(Operation::Describe, &g.group_id))
        .map(|g| {
            let mut listed = ListedGroup::default()
                .with_group_id(GroupId(str_bytes(g.group_id)))
                .with_protocol_type(str_bytes(g.protocol_type));
            if v >= 4 {
                listed.group_state = str_bytes(g.state_name);
            }
            if v >= 5 {
                listed.group_type = str_bytes(g.group_type);
            }
            listed
        })
        .collect();
    groups.extend(super::share_groups_admin::listed(
        &state, &session, &request, &states, v,
    ));
    encode(&ListGroupsResponse::default().with_groups(groups), v)
}
