//! IncrementalAlterConfigs (44): SET, DELETE, APPEND and SUBTRACT (the last two for list
//! configs, starting from the current value, default included) on a topic's overrides or
//! the dynamic broker configs of `""` / this node. `validate_only` checks without applying.

use std::collections::BTreeSet;
use std::sync::Arc;

use kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    ApiKey, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};

use super::config_resources::{
    answer_each, current, effective_value, is_list, replace, Refusal, Resource,
};
use super::{decode, encode, Handler};
use crate::codec::ParsedRequest;
use crate::errors::ResponseError;
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::IncrementalAlterConfigs,
    advertised: (0, 1),
    accepted: (0, 1),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: IncrementalAlterConfigsRequest = decode(&req)?;
    let act = |r: &AlterConfigsResource, resource, answer: AlterConfigsResourceResponse| {
        alter(&state, resource, r, request.validate_only).map(|()| answer)
    };
    let answers = answer_each(&state, &session, &request.resources, act);
    encode(
        &IncrementalAlterConfigsResponse::default().with_responses(answers),
        req.version,
    )
}

fn alter(
    state: &KafkaState,
    resource: Resource,
    r: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), Refusal> {
    let mut configs = current(state, &resource)?;
    let mut seen = BTreeSet::new();
    for c in &r.configs {
        let name = c.name.to_string();
        if !seen.insert(name.clone()) {
            return Err((
                ResponseError::InvalidRequest,
                format!("config {name} given twice"),
            ));
        }
        let value = c.value.as_ref().map(|v| v.to_string());
        match c.config_operation {
            SET => {
                let Some(v) = value else {
                    return Err((
                        ResponseError::InvalidRequest,
                        format!("null value not supported for {name}"),
                    ));
                };
                configs.insert(name, v);
            }
            DELETE => {
                configs.remove(&name);
            }
            APPEND | SUBTRACT => {
                if !is_list(&resource, &name) {
                    return Err((
                        ResponseError::InvalidConfig,
                        format!(
                            "{name} is not a list config: APPEND and SUBTRACT apply to lists only"
                        ),
                    ));
                }
                let base = configs
                    .get(&name)
                    .cloned()
                    .or_else(|| effective_value(state, &resource, &name))
                    .unwrap_or_default();
                let mut items = split(&base);
                let given = split(value.as_deref().unwrap_or(""));
                if c.config_operation == APPEND {
                    for item in given {
                        if !items.contains(&item) {
                            items.push(item);
                        }
                    }
                } else {
                    items.retain(|i| !given.contains(i));
                }
                configs.insert(name, items.join(","));
            }
            op => {
                return Err((
                    ResponseError::InvalidRequest,
                    format!("unknown config operation {op} for {name}"),
                ))
            }
        }
    }
    replace(state, &resource, &configs, validate_only)
}

fn split(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}
