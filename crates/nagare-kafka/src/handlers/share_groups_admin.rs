//! The share-group parts of ListGroups and DeleteGroups (whose handlers serve classic
//! and consumer groups): share groups listed with type `share`, and deleted by the
//! share-group coordinator.

use std::collections::HashMap;

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest};
use nagare_core::security::Operation;

use super::str_bytes;
use crate::errors::{self, share_error};
use crate::meters::Counted;
use crate::session::Session;
use crate::KafkaState;

/// The share groups ListGroups lists (`states` lower-cased, as the handler has them).
pub(crate) fn listed(
    state: &KafkaState,
    session: &Session,
    request: &ListGroupsRequest,
    states: &[String],
    version: i16,
) -> Vec<ListedGroup> {
    let types_ok = request.types_filter.is_empty()
        || request
            .types_filter
            .iter()
            .any(|t| t.eq_ignore_ascii_case("share"));
    // Before v5 there is no group type: a client that cannot tell a share group from
    // a classic one is not shown them (as Kafka does).
    if !types_ok || version < 5 {
        return Vec::new();
    }
    let all = session.cluster_allowed(Operation::Describe);
    state
        .share
        .list()
        .into_iter()
        .filter(|g| all || session.group_allowed(Operation::Describe, g))
        .filter_map(|g| {
            let group_state = if state.share.has_members(&g) {
                "Stable"
            } else {
                "Empty"
            };
            if !states.is_empty() && !states.contains(&group_state.to_lowercase()) {
                return None;
            }
            let mut listed = ListedGroup::default()
                .with_group_id(GroupId(str_bytes(g)))
                .with_protocol_type(str_bytes("share"));
            listed.group_state = str_bytes(group_state);
            listed.group_type = str_bytes("share");
            Some(listed)
        })
        .collect()
}

/// Deletes the share groups among `names` the session may delete; their error codes
/// by group id (groups that are not share groups are left to the caller).
pub(crate) async fn delete(
    state: &KafkaState,
    names: &[GroupId],
    authorized: &[bool],
) -> HashMap<String, i16> {
    let mut out = HashMap::new();
    for (g, ok) in names.iter().zip(authorized) {
        if !*ok || !state.share.exists(g) {
            continue;
        }
        let code = match state.share.delete_group(g).await {
            Ok(()) => errors::NONE,
            Err(e) => share_error(&e).counted(),
        };
        out.insert(g.0.to_string(), code);
    }
    out
}
