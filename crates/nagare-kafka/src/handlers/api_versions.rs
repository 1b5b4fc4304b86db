//! ApiVersions (18): the API list comes from the handler registry. The response header is
//! always v0 (no tagged fields), whatever the request version, so that a client asking a
//! version we do not know can still read the answer; to such a client we answer in v0 with
//! UNSUPPORTED_VERSION and the full list, and it retries with a version we listed.

use crate::meters::Counted;
use std::sync::Arc;

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};

use super::{decode, encode, Handler, REGISTRY};
use crate::codec::ParsedRequest;
use crate::errors::{self, ResponseError};
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::ApiVersions,
    advertised: (0, 4),
    accepted: (0, 4),
    call: |state, _session, req| Box::pin(handle(state, req)),
};

async fn handle(_state: Arc<KafkaState>, req: ParsedRequest) -> Result<Reply, KafkaError> {
    // Only validates: client software name and version are not used.
    let _request: ApiVersionsRequest = decode(&req)?;
    encode(&response(errors::NONE), req.version)
}

/// The v0 answer to a request whose version is above ours.
pub(crate) fn unsupported_version_reply() -> Result<Reply, KafkaError> {
    encode(&response(ResponseError::UnsupportedVersion.counted()), 0)
}

fn response(error_code: i16) -> ApiVersionsResponse {
    let api_keys = REGISTRY
        .iter()
        .map(|h| {
            ApiVersion::default()
                .with_api_key(h.key as i16)
                .with_min_version(h.advertised.0)
                .with_max_version(h.advertised.1)
        })
        .collect();
    ApiVersionsResponse::default()
        .with_error_code(error_code)
        .with_api_keys(api_keys)
        .with_throttle_time_ms(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::Decodable;

    #[test]
    fn list_comes_from_the_registry() {
        let Reply::Body(b) = encode(&response(0), 3).unwrap() else {
            panic!()
        };
        let r = ApiVersionsResponse::decode(&mut b.clone(), 3).unwrap();
        assert_eq!(r.api_keys.len(), REGISTRY.len());
        let produce = r.api_keys.iter().find(|k| k.api_key == 0).unwrap();
        assert_eq!((produce.min_version, produce.max_version), (0, 11));
    }
}
