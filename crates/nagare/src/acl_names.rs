//! ACL fields as people type them (`write`, `describe-configs`, `prefixed`, `User:alice`)
//! and as the HTTP admin API carries them in query strings; shared by `nagare acl` and
//! the `/acls` routes so both spell them the same way.

use nagare_core::security::{
    AclBinding, AclFilter, Operation, PatternFilter, PatternType, Permission, Principal,
    ResourceType,
};
use serde::{Deserialize, Serialize};

/// One ACL or filter in words; every field optional for a filter.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct AclWords {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `literal` (default for a new ACL), `prefixed`; filters also `any` and `match`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// `allow` (default for a new ACL) or `deny`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission: Option<String>,
}

fn norm(s: &str) -> String {
    s.trim().to_ascii_lowercase().replace(['-', '_'], "")
}

pub(crate) fn resource_type(s: &str) -> Result<ResourceType, String> {
    Ok(match norm(s).as_str() {
        "topic" => ResourceType::Topic,
        "group" => ResourceType::Group,
        "cluster" => ResourceType::Cluster,
        "transactionalid" => ResourceType::TransactionalId,
        _ => {
            return Err(format!(
                "unknown resource type {s:?} (topic, group, cluster, transactional-id)"
            ))
        }
    })
}

pub(crate) fn operation(s: &str) -> Result<Operation, String> {
    Ok(match norm(s).as_str() {
        "all" => Operation::All,
        "read" => Operation::Read,
        "write" => Operation::Write,
        "create" => Operation::Create,
        "delete" => Operation::Delete,
        "alter" => Operation::Alter,
        "describe" => Operation::Describe,
        "clusteraction" => Operation::ClusterAction,
        "describeconfigs" => Operation::DescribeConfigs,
        "alterconfigs" => Operation::AlterConfigs,
        "idempotentwrite" => Operation::IdempotentWrite,
        _ => {
            return Err(format!(
                "unknown operation {s:?} (all, read, write, create, delete, alter, describe, \
                 describe-configs, alter-configs, idempotent-write, cluster-action)"
            ))
        }
    })
}

fn permission(s: &str) -> Result<Permission, String> {
    Ok(match norm(s).as_str() {
        "allow" => Permission::Allow,
        "deny" => Permission::Deny,
        _ => return Err(format!("unknown permission {s:?} (allow, deny)")),
    })
}

fn principal(s: &str) -> Result<String, String> {
    let s = s.trim();
    if s == "User:*" || Principal::parse(s).is_some() {
        Ok(s.to_string())
    } else {
        Err(format!(
            "principal {s:?} is not of the form User:NAME or User:*"
        ))
    }
}

impl AclWords {
    /// A new ACL: resource type, name and principal and operation are required.
    pub(crate) fn binding(&self) -> Result<AclBinding, String> {
        let rt = resource_type(
            self.resource_type
                .as_deref()
                .ok_or("a resource type is required")?,
        )?;
        let name = match (rt, &self.name) {
            (ResourceType::Cluster, None) => nagare_core::security::acl::CLUSTER_NAME.to_string(),
            (_, Some(n)) if !n.is_empty() => n.clone(),
            _ => return Err("a resource name is required".into()),
        };
        let pattern = match self.pattern.as_deref().map(norm).as_deref() {
            None | Some("literal") => PatternType::Literal,
            Some("prefixed") => PatternType::Prefixed,
            Some(other) => {
                return Err(format!(
                    "unknown pattern type {other:?} (literal, prefixed)"
                ))
            }
        };
        Ok(AclBinding {
            resource_type: rt,
            resource_name: name,
            pattern,
            principal: principal(self.principal.as_deref().ok_or("a principal is required")?)?,
            host: self.host.clone().unwrap_or_else(|| "*".into()),
            operation: operation(
                self.operation
                    .as_deref()
                    .ok_or("an operation is required")?,
            )?,
            permission: permission(self.permission.as_deref().unwrap_or("allow"))?,
        })
    }

    /// A filter: every absent field matches anything.
    pub(crate) fn filter(&self) -> Result<AclFilter, String> {
        let pattern = match self.pattern.as_deref().map(norm).as_deref() {
            None | Some("any") => PatternFilter::Any,
            Some("match") => PatternFilter::Match,
            Some("literal") => PatternFilter::Exactly(PatternType::Literal),
            Some("prefixed") => PatternFilter::Exactly(PatternType::Prefixed),
            Some(other) => {
                return Err(format!(
                    "unknown pattern type {other:?} (any, match, literal, prefixed)"
                ))
            }
        };
        Ok(AclFilter {
            resource_type: self
                .resource_type
                .as_deref()
                .map(resource_type)
                .transpose()?,
            resource_name: self.name.clone(),
            pattern,
            principal: self.principal.as_deref().map(principal).transpose()?,
            host: self.host.clone(),
            operation: self.operation.as_deref().map(operation).transpose()?,
            permission: self.permission.as_deref().map(permission).transpose()?,
        })
    }

    /// The words of an existing ACL.
    pub(crate) fn of(acl: &AclBinding) -> AclWords {
        let kebab = |s: String| {
            let mut out = String::new();
            for (i, c) in s.chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    out.push('-');
                }
                out.push(c.to_ascii_lowercase());
            }
            out
        };
        AclWords {
            resource_type: Some(kebab(format!("{:?}", acl.resource_type))),
            name: Some(acl.resource_name.clone()),
            pattern: Some(kebab(format!("{:?}", acl.pattern))),
            principal: Some(acl.principal.clone()),
            host: Some(acl.host.clone()),
            operation: Some(kebab(format!("{:?}", acl.operation))),
            permission: Some(kebab(format!("{:?}", acl.permission))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip() {
        let w = AclWords {
            resource_type: Some("topic".into()),
            name: Some("orders".into()),
            pattern: Some("prefixed".into()),
            principal: Some("User:alice".into()),
            host: None,
            operation: Some("describe-configs".into()),
            permission: Some("deny".into()),
        };
        let b = w.binding().unwrap();
        assert_eq!(b.operation, Operation::DescribeConfigs);
        assert_eq!(b.pattern, PatternType::Prefixed);
        assert_eq!(b.host, "*");
        let back = AclWords::of(&b);
        assert_eq!(back.operation.as_deref(), Some("describe-configs"));
        assert_eq!(back.binding().unwrap(), b);
        assert!(AclWords::default().filter().unwrap().matches(&b));
        assert!(AclWords {
            principal: Some("alice".into()),
            ..w
        }
        .binding()
        .is_err());
        let cluster = AclWords {
            resource_type: Some("cluster".into()),
            principal: Some("User:*".into()),
            operation: Some("alter".into()),
            ..Default::default()
        };
        assert_eq!(cluster.binding().unwrap().resource_name, "kafka-cluster");
    }
}
