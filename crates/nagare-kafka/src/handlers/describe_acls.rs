//! DescribeAcls (29): the ACLs one filter matches, grouped by resource pattern as Kafka
//! answers them. Needs Describe on the cluster.

use crate::meters::Counted;
use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{ApiKey, DescribeAclsRequest, DescribeAclsResponse};
use nagare_core::security::Operation;

use super::{decode, encode, str_bytes, Handler};
use crate::acl_wire::{self, WireFilter};
use crate::codec::ParsedRequest;
use crate::errors::{self, ResponseError};
use crate::session::Session;
use crate::{KafkaError, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::DescribeAcls,
    // v0 is gone since Kafka 4.0; v1 is what librdkafka sends, v2-3 the Java client.
    advertised: (1, 3),
    accepted: (1, 3),
    call: |_state, session, req| Box::pin(handle(session, req)),
};

async fn handle(session: Arc<Session>, req: ParsedRequest) -> Result<Reply, KafkaError> {
    let request: DescribeAclsRequest = decode(&req)?;
    let refuse = |error: ResponseError, message: String| {
        encode(
            &DescribeAclsResponse::default()
                .with_error_code(error.counted())
                .with_error_message(Some(str_bytes(message))),
            req.version,
        )
    };
    if !session.cluster_allowed(Operation::Describe) {
        return refuse(
            ResponseError::ClusterAuthorizationFailed,
            "describing ACLs needs Describe on the cluster".into(),
        );
    }
    let filter = match acl_wire::filter(&WireFilter {
        resource_type: request.resource_type_filter,
        resource_name: request.resource_name_filter.as_deref(),
        pattern_type: request.pattern_type_filter,
        principal: request.principal_filter.as_deref(),
        host: request.host_filter.as_deref(),
        operation: request.operation,
        permission: request.permission_type,
    }) {
        Ok(f) => f,
        Err(e) => return refuse(e.response_error(), e.to_string()),
    };
    let acls = filter
        .map(|f| session.security().authorizer.describe(&f))
        .unwrap_or_default();
    // One entry per resource pattern, in a stable order.
    let mut by_resource: BTreeMap<(i8, String, i8), Vec<AclDescription>> = BTreeMap::new();
    for acl in &acls {
        let (resource_type, pattern, operation, permission) = acl_wire::codes(acl);
        by_resource
            .entry((resource_type, acl.resource_name.clone(), pattern))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(str_bytes(acl.principal.as_str()))
                    .with_host(str_bytes(acl.host.as_str()))
                    .with_operation(operation)
                    .with_permission_type(permission),
            );
    }
    let resources = by_resource
        .into_iter()
        .map(|((resource_type, name, pattern), acls)| {
            DescribeAclsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(str_bytes(name))
                .with_pattern_type(pattern)
                .with_acls(acls)
        })
        .collect();
    encode(
        &DescribeAclsResponse::default()
            .with_error_code(errors::NONE)
            .with_resources(resources),
        req.version,
    )
}
