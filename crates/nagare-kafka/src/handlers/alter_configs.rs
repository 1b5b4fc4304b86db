//! AlterConfigs (33), the legacy form: the configs given replace every config set on the
//! resource (a topic's overrides, or the dynamic broker configs of `""` / this node);
//! those not given return to their defaults. `validate_only` checks without applying.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse, ApiKey};

use super::config_resources::{answer_each, replace, Refusal};
use super::{decode, encode, Handler};
use crate::codec::ParsedRequest;
use crate::errors::ResponseError;
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::AlterConfigs,
    advertised: (0, 2),
    accepted: (0, 2),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: AlterConfigsRequest = decode(&req)?;
    let act = |r: &AlterConfigsResource, resource, answer: AlterConfigsResourceResponse| {
        replace(&state, &resource, &configs(r)?, request.validate_only).map(|()| answer)
    };
    let answers = answer_each(&state, &session, &request.resources, act);
    encode(
        &AlterConfigsResponse::default().with_responses(answers),
        req.version,
    )
}

/// The configs given (a null value leaves the config out: back to its default).
fn configs(r: &AlterConfigsResource) -> Result<BTreeMap<String, String>, Refusal> {
    let mut configs = BTreeMap::new();
    for c in &r.configs {
        if configs.contains_key(&*c.name) {
            return Err((
                ResponseError::InvalidRequest,
                format!("config {} given twice", &*c.name),
            ));
        }
        if let Some(v) = &c.value {
            configs.insert(c.name.to_string(), v.to_string());
        }
    }
    Ok(configs)
}
