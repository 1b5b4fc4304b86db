//! DeleteGroups (42): deletes empty groups and their committed offsets.

use std::sync::Arc;

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{ApiKey, DeleteGroupsRequest, DeleteGroupsResponse};

use super::{decode, encode, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, group_error};
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::DeleteGroups,
    advertised: (0, 2),
    accepted: (0, 2),
    call: |state, _session, req| Box::pin(handle(state, req)),
};

async fn handle(state: Arc<KafkaState>, req: ParsedRequest) -> Result<Reply, KafkaError> {
    let request: DeleteGroupsRequest = decode(&req)?;
    let ids: Vec<String> = request
        .groups_names
        .iter()
        .map(|g| g.0.to_string())
        .collect();
    let results = state.groups.delete_groups(&ids).await;
    let results = request
        .groups_names
        .iter()
        .zip(results)
        .map(|(id, r)| {
            DeletableGroupResult::default()
                .with_group_id(id.clone())
                .with_error_code(r.err().map_or(errors::NONE, |e| group_error(&e).code()))
        })
        .collect();
    encode(
        &DeleteGroupsResponse::default().with_results(results),
        req.version,
    )
}
