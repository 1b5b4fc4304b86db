//! AlterConfigs (33), the legacy form: the configs given replace every config set on the
//! resource (a topic's overrides, or the dynamic broker configs of `""` / this node);
//! those not given return to their defaults. `validate_only` checks without applying.

use crate::meters::Counted;
use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse, ApiKey};
use nagare_core::security::Operation;

use super::config_resources::{replace, resolve};
use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, ResponseError};
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
    let responses = request
        .resources
        .iter()
        .map(|r| {
            let response = AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let outcome = resolve(
                &state,
                &session,
                Operation::AlterConfigs,
                r.resource_type,
                &r.resource_name,
            )
            .and_then(|resource| {
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
                replace(&state, &resource, &configs, request.validate_only)
            });
            match outcome {
                Ok(()) => response.with_error_code(errors::NONE),
                Err((error, message)) => response
                    .with_error_code(error.counted())
                    .with_error_message(Some(str_bytes(message))),
            }
        })
        .collect();
    encode(
        &AlterConfigsResponse::default().with_responses(responses),
        req.version,
    )
}
