//! ACLs as the Kafka ACL APIs (CreateAcls, DescribeAcls, DeleteAcls) carry them: numeric
//! codes (owned by `nagare_core::security::acl`, beside the enums) and strings, turned
//! into the core's [`AclBinding`] and [`AclFilter`] and back. What Kafka would refuse is
//! an [`AclWireError`], which the handlers answer per binding or filter.

use nagare_core::security::acl::KAFKA_ANY;
use nagare_core::security::{
    AclBinding, AclFilter, Operation, PatternFilter, Permission, ResourceType,
};
use thiserror::Error;

use crate::errors::ResponseError;

/// Why a binding or filter from the wire cannot be used; answered INVALID_REQUEST with
/// the message, as Kafka's `InvalidRequestException`.
#[derive(Debug, Error, PartialEq, Eq)]
pub(crate) enum AclWireError {
    #[error("invalid resource type {0}")]
    ResourceType(i8),
    #[error("invalid pattern type {0}: a new ACL is LITERAL (3) or PREFIXED (4)")]
    PatternType(i8),
    #[error("invalid operation {0}")]
    Operation(i8),
    #[error("invalid permission type {0}: a new ACL is DENY (2) or ALLOW (3)")]
    Permission(i8),
    #[error("unknown {field} filter {code}")]
    Filter { field: &'static str, code: i8 },
}

impl AclWireError {
    pub(crate) fn response_error(&self) -> ResponseError {
        ResponseError::InvalidRequest
    }
}

/// Kafka's codes for resource types and operations nagare keeps no ACLs for (delegation
/// tokens 6, users 7; CREATE_TOKENS 13, DESCRIBE_TOKENS 14, TWO_PHASE_COMMIT 15): a filter
/// naming them is valid and matches nothing.
const KNOWN_UNSUPPORTED_RESOURCE_TYPES: [i8; 2] = [6, 7];
const KNOWN_UNSUPPORTED_OPERATIONS: [i8; 3] = [13, 14, 15];

/// The fields of one ACL as CreateAcls carries them.
pub(crate) struct WireAcl<'a> {
    pub resource_type: i8,
    pub resource_name: &'a str,
    pub pattern_type: i8,
    pub principal: &'a str,
    pub host: &'a str,
    pub operation: i8,
    pub permission: i8,
}

/// A new ACL from the wire. Names, principals and hosts are checked by the authorizer
/// (`Authorizer::create`), the one place that knows what is valid.
pub(crate) fn binding(w: &WireAcl<'_>) -> Result<AclBinding, AclWireError> {
    Ok(AclBinding {
        resource_type: ResourceType::from_kafka_code(w.resource_type)
            .ok_or(AclWireError::ResourceType(w.resource_type))?,
        resource_name: w.resource_name.to_string(),
        pattern: match PatternFilter::from_kafka_code(w.pattern_type) {
            Some(PatternFilter::Exactly(p)) => p,
            _ => return Err(AclWireError::PatternType(w.pattern_type)),
        },
        principal: w.principal.to_string(),
        host: w.host.to_string(),
        operation: Operation::from_kafka_code(w.operation)
            .ok_or(AclWireError::Operation(w.operation))?,
        permission: Permission::from_kafka_code(w.permission)
            .ok_or(AclWireError::Permission(w.permission))?,
    })
}

/// The fields of one filter as DescribeAcls and DeleteAcls carry them.
pub(crate) struct WireFilter<'a> {
    pub resource_type: i8,
    pub resource_name: Option<&'a str>,
    pub pattern_type: i8,
    pub principal: Option<&'a str>,
    pub host: Option<&'a str>,
    pub operation: i8,
    pub permission: i8,
}

/// A filter from the wire: `Ok(None)` when it is valid but can match no ACL nagare keeps
/// (a resource type or operation nagare has no ACLs for).
pub(crate) fn filter(w: &WireFilter<'_>) -> Result<Option<AclFilter>, AclWireError> {
    let invalid = |field, code| AclWireError::Filter { field, code };
    let resource_type = match w.resource_type {
        KAFKA_ANY => None,
        c if KNOWN_UNSUPPORTED_RESOURCE_TYPES.contains(&c) => return Ok(None),
        c => Some(ResourceType::from_kafka_code(c).ok_or(invalid("resource type", c))?),
    };
    let pattern = PatternFilter::from_kafka_code(w.pattern_type)
        .ok_or(invalid("pattern type", w.pattern_type))?;
    let operation = match w.operation {
        KAFKA_ANY => None,
        c if KNOWN_UNSUPPORTED_OPERATIONS.contains(&c) => return Ok(None),
        c => Some(Operation::from_kafka_code(c).ok_or(invalid("operation", c))?),
    };
    let permission = match w.permission {
        KAFKA_ANY => None,
        c => Some(Permission::from_kafka_code(c).ok_or(invalid("permission type", c))?),
    };
    Ok(Some(AclFilter {
        resource_type,
        resource_name: w.resource_name.map(str::to_string),
        pattern,
        principal: w.principal.map(str::to_string),
        host: w.host.map(str::to_string),
        operation,
        permission,
    }))
}

/// The wire codes of a stored ACL: (resource type, pattern type, operation, permission).
pub(crate) fn codes(acl: &AclBinding) -> (i8, i8, i8, i8) {
    (
        acl.resource_type.kafka_code(),
        acl.pattern.kafka_code(),
        acl.operation.kafka_code(),
        acl.permission.kafka_code(),
    )
}

#[cfg(test)]
mod tests {
    use nagare_core::security::PatternType;

    use super::*;

    fn wire(rt: i8, pattern: i8, op: i8, perm: i8) -> WireAcl<'static> {
        WireAcl {
            resource_type: rt,
            resource_name: "orders",
            pattern_type: pattern,
            principal: "User:alice",
            host: "*",
            operation: op,
            permission: perm,
        }
    }

    #[test]
    fn bindings_map_kafka_codes() {
        let b = binding(&wire(2, 4, 4, 3)).unwrap();
        assert_eq!(b.resource_type, ResourceType::Topic);
        assert_eq!(b.pattern, PatternType::Prefixed);
        assert_eq!(b.operation, Operation::Write);
        assert_eq!(b.permission, Permission::Allow);
        assert_eq!(codes(&b), (2, 4, 4, 3));
        let g = binding(&wire(3, 3, 3, 2)).unwrap();
        assert_eq!(
            (g.resource_type, g.pattern, g.operation, g.permission),
            (
                ResourceType::Group,
                PatternType::Literal,
                Operation::Read,
                Permission::Deny
            )
        );
        // ANY and MATCH are for filters; UNKNOWN (0) and unsupported types never.
        assert_eq!(
            binding(&wire(1, 3, 4, 3)),
            Err(AclWireError::ResourceType(1))
        );
        assert_eq!(
            binding(&wire(6, 3, 4, 3)),
            Err(AclWireError::ResourceType(6))
        );
        assert_eq!(
            binding(&wire(2, 2, 4, 3)),
            Err(AclWireError::PatternType(2))
        );
        assert_eq!(
            binding(&wire(2, 1, 4, 3)),
            Err(AclWireError::PatternType(1))
        );
        assert_eq!(binding(&wire(2, 3, 1, 3)), Err(AclWireError::Operation(1)));
        assert_eq!(binding(&wire(2, 3, 0, 3)), Err(AclWireError::Operation(0)));
        assert_eq!(binding(&wire(2, 3, 4, 1)), Err(AclWireError::Permission(1)));
    }

    fn wire_filter(rt: i8, pattern: i8, op: i8, perm: i8) -> WireFilter<'static> {
        WireFilter {
            resource_type: rt,
            resource_name: None,
            pattern_type: pattern,
            principal: Some("User:alice"),
            host: None,
            operation: op,
            permission: perm,
        }
    }

    #[test]
    fn filters_map_any_match_and_unknowns() {
        let f = filter(&wire_filter(1, 1, 1, 1)).unwrap().unwrap();
        assert_eq!(f.resource_type, None);
        assert_eq!(f.pattern, PatternFilter::Any);
        assert_eq!(f.operation, None);
        assert_eq!(f.permission, None);
        assert_eq!(f.principal.as_deref(), Some("User:alice"));
        let f = filter(&wire_filter(2, 2, 8, 2)).unwrap().unwrap();
        assert_eq!(f.resource_type, Some(ResourceType::Topic));
        assert_eq!(f.pattern, PatternFilter::Match);
        assert_eq!(f.operation, Some(Operation::Describe));
        assert_eq!(f.permission, Some(Permission::Deny));
        // Types and operations Kafka knows but nagare keeps no ACLs for match nothing.
        assert_eq!(filter(&wire_filter(6, 1, 1, 1)), Ok(None));
        assert_eq!(filter(&wire_filter(2, 1, 13, 1)), Ok(None));
        // UNKNOWN (0) and undefined codes are refused.
        for w in [
            wire_filter(0, 1, 1, 1),
            wire_filter(2, 0, 1, 1),
            wire_filter(2, 1, 0, 1),
            wire_filter(2, 1, 1, 0),
            wire_filter(99, 1, 1, 1),
        ] {
            assert!(matches!(filter(&w), Err(AclWireError::Filter { .. })));
        }
    }
}
