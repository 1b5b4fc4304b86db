//! Kafka-style ACLs: which principal may do which operation on which resource, from
//! which host. Deny wins over allow; super users bypass every check; when no ACL
//! matches a resource, [`SecurityConfig::allow_if_no_acl`](super::SecurityConfig) decides.
//!
//! Implied operations as in Kafka: `Describe` is allowed by `Read`, `Write`, `Delete` or
//! `Alter`; `DescribeConfigs` by `AlterConfigs`. `All` matches every operation.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use super::Principal;
use crate::CoreError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResourceType {
    Topic,
    Group,
    TransactionalId,
    Cluster,
}

/// How an ACL's resource name matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PatternType {
    Literal,
    Prefixed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    All,
    Read,
    Write,
    Create,
    Delete,
    Alter,
    Describe,
    ClusterAction,
    DescribeConfigs,
    AlterConfigs,
    IdempotentWrite,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Permission {
    Allow,
    Deny,
}

/// One ACL. `principal` is `User:NAME` or `User:*`; `host` is an IP address or `*`.
/// A literal resource name `*` matches every resource of its type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub resource_name: String,
    pub pattern: PatternType,
    pub principal: String,
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

/// How a filter matches pattern types (Kafka's `PatternTypeFilter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatternFilter {
    /// Any pattern type, resource names compared exactly.
    Any,
    /// Every ACL that would apply to the named resource (literal, `*`, prefixes of it).
    Match,
    Exactly(PatternType),
}

/// Selects ACLs (DescribeAcls, DeleteAcls); `None` fields match anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFilter {
    pub resource_type: Option<ResourceType>,
    pub resource_name: Option<String>,
    pub pattern: PatternFilter,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Option<Operation>,
    pub permission: Option<Permission>,
}

impl AclFilter {
    /// Matches every ACL.
    pub fn any() -> AclFilter {
        AclFilter {
            resource_type: None,
            resource_name: None,
            pattern: PatternFilter::Any,
            principal: None,
            host: None,
            operation: None,
            permission: None,
        }
    }

    pub fn matches(&self, _acl: &AclBinding) -> bool {
        // Skeleton: the security helper implements the filter semantics.
        true
    }
}

/// The one authorizer of the broker. Persisted in an internal log; every change bumps
/// [`Authorizer::generation`], which is how per-connection caches know to forget.
pub struct Authorizer {
    generation: AtomicU64,
    super_users: Vec<String>,
    allow_if_no_acl: bool,
}

impl Authorizer {
    /// Skeleton constructor (in memory); the real one opens the internal log.
    pub fn in_memory(super_users: Vec<String>, allow_if_no_acl: bool) -> Authorizer {
        Authorizer {
            generation: AtomicU64::new(0),
            super_users,
            allow_if_no_acl,
        }
    }

    /// Bumped on every change of the ACLs.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// True when no ACL exists and unmatched resources are allowed: every check passes,
    /// so callers may skip their cache entirely.
    pub fn allows_everything(&self) -> bool {
        self.allow_if_no_acl
    }

    /// Whether `principal` connected from `host` may do `op` on the resource.
    pub fn authorize(
        &self,
        principal: &Principal,
        _host: IpAddr,
        _op: Operation,
        _resource_type: ResourceType,
        _name: &str,
    ) -> bool {
        if let Principal::User(n) = principal {
            if self.super_users.iter().any(|s| **s == **n) {
                return true;
            }
        }
        self.allow_if_no_acl
    }

    /// Adds ACLs (already present ones are no-ops), durably. One result per binding.
    pub async fn create(&self, bindings: Vec<AclBinding>) -> Vec<Result<(), CoreError>> {
        self.generation.fetch_add(1, Ordering::AcqRel);
        bindings.into_iter().map(|_| Ok(())).collect()
    }

    /// Removes the ACLs each filter matches, durably; returns what each one removed.
    pub async fn delete(&self, filters: Vec<AclFilter>) -> Result<Vec<Vec<AclBinding>>, CoreError> {
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(filters.into_iter().map(|_| Vec::new()).collect())
    }

    /// The ACLs `filter` matches.
    pub fn describe(&self, _filter: &AclFilter) -> Vec<AclBinding> {
        Vec::new()
    }
}
