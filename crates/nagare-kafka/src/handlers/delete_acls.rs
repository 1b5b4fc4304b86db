//! DeleteAcls (31): removes the ACLs each filter matches, durably, and answers with what
//! each one removed; every connection's cached decisions are forgotten at once. Needs
//! Alter on the cluster. An invalid filter gets INVALID_REQUEST; the others still apply.

use crate::meters::Counted;
use std::sync::Arc;

use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::{ApiKey, DeleteAclsRequest, DeleteAclsResponse};
use nagare_core::security::{AclBinding, Operation};

use super::{decode, encode, str_bytes, Handler};
use crate::acl_wire::{self, WireFilter};
use crate::codec::ParsedRequest;
use crate::errors::{self, core_error, ResponseError};
use crate::session::Session;
use crate::{KafkaError, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::DeleteAcls,
    // v0 is gone since Kafka 4.0; v1 is what librdkafka sends, v2-3 the Java client.
    advertised: (1, 3),
    accepted: (1, 3),
    call: |_state, session, req| Box::pin(handle(session, req)),
};

fn failed(error: ResponseError, message: String) -> DeleteAclsFilterResult {
    DeleteAclsFilterResult::default()
        .with_error_code(error.counted())
        .with_error_message(Some(str_bytes(message)))
}

fn matching(acl: &AclBinding) -> DeleteAclsMatchingAcl {
    let (resource_type, pattern, operation, permission) = acl_wire::codes(acl);
    DeleteAclsMatchingAcl::default()
        .with_error_code(errors::NONE)
        .with_resource_type(resource_type)
        .with_resource_name(str_bytes(acl.resource_name.as_str()))
        .with_pattern_type(pattern)
        .with_principal(str_bytes(acl.principal.as_str()))
        .with_host(str_bytes(acl.host.as_str()))
        .with_operation(operation)
        .with_permission_type(permission)
}

async fn handle(session: Arc<Session>, req: ParsedRequest) -> Result<Reply, KafkaError> {
    let request: DeleteAclsRequest = decode(&req)?;
    let filter_results = if !session.cluster_allowed(Operation::Alter) {
        request
            .filters
            .iter()
            .map(|_| {
                failed(
                    ResponseError::ClusterAuthorizationFailed,
                    "deleting ACLs needs Alter on the cluster".into(),
                )
            })
            .collect()
    } else {
        delete(&session, &request).await
    };
    encode(
        &DeleteAclsResponse::default().with_filter_results(filter_results),
        req.version,
    )
}

async fn delete(session: &Session, request: &DeleteAclsRequest) -> Vec<DeleteAclsFilterResult> {
    let parsed: Vec<_> = request
        .filters
        .iter()
        .map(|f| {
            acl_wire::filter(&WireFilter {
                resource_type: f.resource_type_filter,
                resource_name: f.resource_name_filter.as_deref(),
                pattern_type: f.pattern_type_filter,
                principal: f.principal_filter.as_deref(),
                host: f.host_filter.as_deref(),
                operation: f.operation,
                permission: f.permission_type,
            })
        })
        .collect();
    // Only filters that can match something reach the authorizer, in one change.
    let usable: Vec<_> = parsed
        .iter()
        .filter_map(|p| p.as_ref().ok().and_then(Option::as_ref))
        .cloned()
        .collect();
    let removed = if usable.is_empty() {
        Ok(Vec::new())
    } else {
        session.security().authorizer.delete(usable).await
    };
    let mut removed = removed.map(Vec::into_iter);
    let principal = session.principal();
    parsed
        .into_iter()
        .map(|p| match p {
            Err(e) => failed(e.response_error(), e.to_string()),
            Ok(None) => DeleteAclsFilterResult::default().with_error_code(errors::NONE),
            Ok(Some(_)) => match &mut removed {
                Err(e) => failed(core_error(e), e.to_string()),
                Ok(each) => {
                    let acls = each.next().unwrap_or_default();
                    for acl in &acls {
                        tracing::info!(by = %principal, ?acl, "ACL deleted");
                    }
                    DeleteAclsFilterResult::default()
                        .with_error_code(errors::NONE)
                        .with_matching_acls(acls.iter().map(matching).collect())
                }
            },
        })
        .collect()
}
