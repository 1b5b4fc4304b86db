//! CreateAcls (30): adds ACLs to the broker's one authorizer, durably (the internal log
//! `acls`); every connection's cached decisions are forgotten at once. Needs Alter on the
//! cluster. Each creation is answered on its own: an invalid one gets INVALID_REQUEST and
//! a message, the others are added.

use crate::meters::Counted;
use std::sync::Arc;

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{ApiKey, CreateAclsRequest, CreateAclsResponse};
use nagare_core::security::Operation;

use super::{decode, encode, str_bytes, Handler};
use crate::acl_wire::{self, WireAcl};
use crate::codec::ParsedRequest;
use crate::errors::{self, core_error, ResponseError};
use crate::session::Session;
use crate::{KafkaError, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::CreateAcls,
    // v0 is gone since Kafka 4.0; v1 is what librdkafka sends, v2-3 the Java client.
    advertised: (1, 3),
    accepted: (1, 3),
    call: |_state, session, req| Box::pin(handle(session, req)),
};

fn failed(error: ResponseError, message: String) -> AclCreationResult {
    AclCreationResult::default()
        .with_error_code(error.counted())
        .with_error_message(Some(str_bytes(message)))
}

async fn handle(session: Arc<Session>, req: ParsedRequest) -> Result<Reply, KafkaError> {
    let request: CreateAclsRequest = decode(&req)?;
    if !session.cluster_allowed(Operation::Alter) {
        let results = request
            .creations
            .iter()
            .map(|_| {
                failed(
                    ResponseError::ClusterAuthorizationFailed,
                    "creating ACLs needs Alter on the cluster".into(),
                )
            })
            .collect();
        return encode(
            &CreateAclsResponse::default().with_results(results),
            req.version,
        );
    }
    // Per creation: the binding to add, or why not.
    let parsed: Vec<_> = request
        .creations
        .iter()
        .map(|c| {
            acl_wire::binding(&WireAcl {
                resource_type: c.resource_type,
                resource_name: &c.resource_name,
                pattern_type: c.resource_pattern_type,
                principal: &c.principal,
                host: &c.host,
                operation: c.operation,
                permission: c.permission_type,
            })
        })
        .collect();
    let valid: Vec<_> = parsed
        .iter()
        .filter_map(|p| p.as_ref().ok())
        .cloned()
        .collect();
    let mut added = session
        .security()
        .authorizer
        .create(valid.clone())
        .await
        .into_iter();
    let principal = session.principal();
    let results = parsed
        .into_iter()
        .map(|p| match p {
            Err(e) => failed(e.response_error(), e.to_string()),
            Ok(acl) => match added.next() {
                Some(Ok(())) => {
                    tracing::info!(by = %principal, ?acl, "ACL added");
                    AclCreationResult::default().with_error_code(errors::NONE)
                }
                Some(Err(e)) => failed(core_error(&e), e.to_string()),
                None => failed(ResponseError::UnknownServerError, "no answer".into()),
            },
        })
        .collect();
    encode(
        &CreateAclsResponse::default().with_results(results),
        req.version,
    )
}
