//! DeleteGroups (42): deletes empty groups and their committed offsets.

use crate::meters::Counted;
use std::sync::Arc;

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{ApiKey, DeleteGroupsRequest, DeleteGroupsResponse};
use nagare_core::security::Operation;

use super::{decode, encode, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, group_error, ResponseError};
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::DeleteGroups,
    advertised: (0, 2),
    accepted: (0, 2),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: DeleteGroupsRequest = decode(&req)?;
    // Delete on each group; the others are not touched.
    let authorized: Vec<bool> = request
        .groups_names
        .iter()
        .map(|g| session.group_allowed(Operation::Delete, g))
        .collect();
    // Share groups are the share-group coordinator's.
    let share = super::share_groups_admin::delete(&state, &request.groups_names, &authorized).await;
    let ids: Vec<String> = request
        .groups_names
        .iter()
        .zip(&authorized)
        .filter(|(g, ok)| **ok && !share.contains_key(g.0.as_str()))
        .map(|(g, _)| g.0.to_string())
        .collect();
    let mut deleted = state.groups.delete_groups(&ids).await.into_iter();
    let results = request
        .groups_names
        .iter()
        .zip(&authorized)
        .map(|(id, ok)| {
            let error = if !ok {
                ResponseError::GroupAuthorizationFailed.counted()
            } else if let Some(code) = share.get(id.0.as_str()) {
                *code
            } else {
                match deleted.next() {
                    Some(r) => r.err().map_or(errors::NONE, |e| group_error(&e).counted()),
                    None => ResponseError::UnknownServerError.counted(),
                }
            };
            DeletableGroupResult::default()
                .with_group_id(id.clone())
                .with_error_code(error)
        })
        .collect();
    encode(
        &DeleteGroupsResponse::default().with_results(results),
        req.version,
    )
}
