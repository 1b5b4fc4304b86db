//! Kafka-style ACLs: which principal may do which operation on which resource, from
//! which host. Deny wins over allow; super users bypass every check; when no ACL
//! matches a resource, [`SecurityConfig::allow_if_no_acl`](super::SecurityConfig) decides.
//!
//! Implied operations as in Kafka: `Describe` is allowed by `Read`, `Write`, `Delete` or
//! `Alter`; `DescribeConfigs` by `AlterConfigs`. `All` matches every operation.

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use nagare_log::batch::{NewRecord, Record};
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};

use super::Principal;
use crate::internal_log::{InternalLog, InternalLogWriter, InternalOp, Replayed, Ticket};
use crate::{Broker, CoreError};

/// The internal log holding the ACLs (`DATA/__nagare_acls-0`).
pub const ACLS_LOG: &str = "acls";
/// The one name of the cluster resource (Kafka's `kafka-cluster`).
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// The wildcard resource name, principal and host.
pub const WILDCARD: &str = "*";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ResourceType {
    Topic,
    Group,
    TransactionalId,
    Cluster,
}

/// How an ACL's resource name matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PatternType {
    Literal,
    Prefixed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Permission {
    Allow,
    Deny,
}

/// Kafka's wire code meaning "any" in the filter enums (`ResourceType`, `PatternType`,
/// `AclOperation`, `AclPermissionType` all use 1); never a value of a stored ACL.
pub const KAFKA_ANY: i8 = 1;

// Kafka's numeric codes for the ACL enums (CreateAcls, DescribeAcls, DeleteAcls, and the
// authorized-operations bit fields). They live here, beside the enums, so every front end
// that speaks Kafka's numbers maps them the same way; the HTTP API uses words instead.

impl ResourceType {
    pub fn kafka_code(self) -> i8 {
        match self {
            ResourceType::Topic => 2,
            ResourceType::Group => 3,
            ResourceType::Cluster => 4,
            ResourceType::TransactionalId => 5,
        }
    }

    /// `None` for ANY, UNKNOWN and types nagare has no ACLs for (delegation tokens, users).
    pub fn from_kafka_code(code: i8) -> Option<ResourceType> {
        Some(match code {
            2 => ResourceType::Topic,
            3 => ResourceType::Group,
            4 => ResourceType::Cluster,
            5 => ResourceType::TransactionalId,
            _ => return None,
        })
    }

    /// The operations that mean something for this type (Kafka's
    /// `AclEntry.supportedOperations`), which authorized-operations bit fields cover.
    pub fn supported_operations(self) -> &'static [Operation] {
        use Operation::*;
        match self {
            ResourceType::Topic => &[
                Read,
                Write,
                Create,
                Describe,
                Delete,
                Alter,
                DescribeConfigs,
                AlterConfigs,
            ],
            ResourceType::Group => &[Read, Describe, Delete],
            ResourceType::Cluster => &[
                Create,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                Alter,
                Describe,
            ],
            ResourceType::TransactionalId => &[Describe, Write],
        }
    }
}

impl PatternType {
    pub fn kafka_code(self) -> i8 {
        match self {
            PatternType::Literal => 3,
            PatternType::Prefixed => 4,
        }
    }
}

impl PatternFilter {
    /// ANY (1), MATCH (2), LITERAL (3), PREFIXED (4); `None` for UNKNOWN and the rest.
    pub fn from_kafka_code(code: i8) -> Option<PatternFilter> {
        Some(match code {
            1 => PatternFilter::Any,
            2 => PatternFilter::Match,
            3 => PatternFilter::Exactly(PatternType::Literal),
            4 => PatternFilter::Exactly(PatternType::Prefixed),
            _ => return None,
        })
    }
}

impl Operation {
    pub fn kafka_code(self) -> i8 {
        match self {
            Operation::All => 2,
            Operation::Read => 3,
            Operation::Write => 4,
            Operation::Create => 5,
            Operation::Delete => 6,
            Operation::Alter => 7,
            Operation::Describe => 8,
            Operation::ClusterAction => 9,
            Operation::DescribeConfigs => 10,
            Operation::AlterConfigs => 11,
            Operation::IdempotentWrite => 12,
        }
    }

    /// `None` for ANY (1), UNKNOWN (0) and codes Kafka has not defined.
    pub fn from_kafka_code(code: i8) -> Option<Operation> {
        Some(match code {
            2 => Operation::All,
            3 => Operation::Read,
            4 => Operation::Write,
            5 => Operation::Create,
            6 => Operation::Delete,
            7 => Operation::Alter,
            8 => Operation::Describe,
            9 => Operation::ClusterAction,
            10 => Operation::DescribeConfigs,
            11 => Operation::AlterConfigs,
            12 => Operation::IdempotentWrite,
            _ => return None,
        })
    }
}

impl Permission {
    pub fn kafka_code(self) -> i8 {
        match self {
            Permission::Deny => 2,
            Permission::Allow => 3,
        }
    }

    /// `None` for ANY (1) and UNKNOWN (0).
    pub fn from_kafka_code(code: i8) -> Option<Permission> {
        match code {
            2 => Some(Permission::Deny),
            3 => Some(Permission::Allow),
            _ => None,
        }
    }
}

/// One ACL. `principal` is `User:NAME` or `User:*`; `host` is an IP address or `*`.
/// A literal resource name `*` matches every resource of its type.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
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

    /// Kafka's `AclBindingFilter::matches`: every given field equal; the resource name
    /// compared as the pattern filter says.
    pub fn matches(&self, acl: &AclBinding) -> bool {
        self.resource_type.is_none_or(|t| t == acl.resource_type)
            && self.matches_resource(acl)
            && self.principal.as_ref().is_none_or(|p| *p == acl.principal)
            && self.host.as_ref().is_none_or(|h| *h == acl.host)
            && self.operation.is_none_or(|o| o == acl.operation)
            && self.permission.is_none_or(|p| p == acl.permission)
    }

    fn matches_resource(&self, acl: &AclBinding) -> bool {
        match self.pattern {
            PatternFilter::Exactly(p) if p != acl.pattern => return false,
            _ => {}
        }
        let Some(name) = &self.resource_name else {
            return true;
        };
        match self.pattern {
            PatternFilter::Any | PatternFilter::Exactly(_) => *name == acl.resource_name,
            PatternFilter::Match => resource_matches(acl, name),
        }
    }
}

/// Whether `acl`'s resource pattern covers the resource `name` (same type assumed): a
/// literal name equal to it or `*`, or a prefix of it.
fn resource_matches(acl: &AclBinding, name: &str) -> bool {
    match acl.pattern {
        PatternType::Literal => acl.resource_name == name || acl.resource_name == WILDCARD,
        PatternType::Prefixed => name.starts_with(acl.resource_name.as_str()),
    }
}

fn principal_matches(acl: &AclBinding, principal: &Principal) -> bool {
    match acl.principal.strip_prefix("User:") {
        Some(WILDCARD) => true,
        Some(name) => name == principal.name(),
        None => false,
    }
}

fn host_matches(acl: &AclBinding, host: IpAddr) -> bool {
    acl.host == WILDCARD
        || acl
            .host
            .parse::<IpAddr>()
            .is_ok_and(|h| h.to_canonical() == host.to_canonical())
}

/// Operations an ALLOW of `acl_op` grants `op` through: itself, `All`, and for
/// `Describe`/`DescribeConfigs` the operations that imply them.
fn allow_covers(acl_op: Operation, op: Operation) -> bool {
    use Operation::*;
    acl_op == op
        || acl_op == All
        || match op {
            Describe => matches!(acl_op, Read | Write | Delete | Alter),
            DescribeConfigs => acl_op == AlterConfigs,
            _ => false,
        }
}

/// A DENY applies to its own operation and, as `All`, to every one (no implication).
fn deny_covers(acl_op: Operation, op: Operation) -> bool {
    acl_op == op || acl_op == Operation::All
}

/// Why Kafka would refuse to create `acl`, if it would.
fn validate(acl: &AclBinding) -> Result<(), CoreError> {
    let invalid = |reason: &str| Err(CoreError::InvalidAcl(reason.to_string()));
    if acl.resource_name.is_empty() {
        return invalid("resource name should not be empty");
    }
    if acl.pattern == PatternType::Prefixed && acl.resource_name == WILDCARD {
        return invalid("a PREFIXED ACL cannot use the wildcard name *: use LITERAL *");
    }
    if acl.resource_type == ResourceType::Cluster && acl.resource_name != CLUSTER_NAME {
        return invalid("the only valid name for the CLUSTER resource is kafka-cluster");
    }
    match acl.principal.split_once(':') {
        Some(("User", name)) if !name.is_empty() => {}
        Some((_, _)) => return invalid("only User principals are supported (User:NAME or User:*)"),
        None => return invalid(
            "could not parse the principal (no colon separates the principal type from the name)",
        ),
    }
    if acl.host != WILDCARD && acl.host.parse::<IpAddr>().is_err() {
        return invalid("the host must be * or an IP address");
    }
    Ok(())
}

type Acls = HashSet<AclBinding>;

/// One change of the ACLs. Stored keyed by the whole binding (JSON; fields in
/// declaration order, so one binding always gives the same key), the value [`PRESENT`]
/// when it exists and a tombstone once removed: the latest record of a binding says
/// whether it exists, which is what the log cleaner keeps.
///
/// Earlier versions keyed records by resource name, each value (this enum as JSON) adding
/// or removing one binding of it: still read, and such a log is rewritten once on open
/// (see `internal_log.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", content = "acl", rename_all = "snake_case")]
pub enum AclOp {
    Add(AclBinding),
    Remove(AclBinding),
}

/// The value of an existing binding's record.
const PRESENT: &[u8] = b"1";

impl InternalOp for AclOp {
    type State = Acls;
    const COMPACT_MIN_RECORDS: i64 = 1_000;

    fn key(&self) -> Bytes {
        let (AclOp::Add(acl) | AclOp::Remove(acl)) = self;
        // Plain structs of strings and enums always serialize.
        serde_json::to_vec(acl).map(Bytes::from).unwrap_or_default()
    }

    fn encode(&self, timestamp: i64) -> NewRecord {
        NewRecord {
            key: Some(self.key()),
            value: match self {
                AclOp::Add(_) => Some(Bytes::from_static(PRESENT)),
                AclOp::Remove(_) => None,
            },
            headers: Vec::new(),
            timestamp,
        }
    }

    fn decode(record: &Record) -> Option<Self> {
        let acl: AclBinding = serde_json::from_slice(record.key.as_deref()?).ok()?;
        match record.value.as_deref() {
            None => Some(AclOp::Remove(acl)),
            Some(PRESENT) => Some(AclOp::Add(acl)),
            Some(_) => None,
        }
    }

    fn replay(record: &Record, acls: &mut Acls) -> Replayed {
        // An earlier version's value is this enum as JSON, never `PRESENT`.
        let legacy = record
            .value
            .as_deref()
            .and_then(|v| serde_json::from_slice::<AclOp>(v).ok());
        let (op, replayed) = match legacy {
            Some(op) => (op, Replayed::Legacy),
            None => match Self::decode(record) {
                Some(op) => (op, Replayed::Current),
                None => return Replayed::Unreadable,
            },
        };
        op.apply(acls);
        replayed
    }

    fn apply(self, acls: &mut Acls) {
        match self {
            AclOp::Add(acl) => {
                acls.insert(acl);
            }
            AclOp::Remove(acl) => {
                acls.remove(&acl);
            }
        }
    }

    fn snapshot(acls: &Acls) -> Vec<Self> {
        acls.iter().cloned().map(AclOp::Add).collect()
    }
}

/// The one authorizer of the broker. Persisted in an internal log; every change bumps
/// [`Authorizer::generation`], which is how per-connection caches know to forget.
pub struct Authorizer {
    generation: AtomicU64,
    super_users: Vec<String>,
    allow_if_no_acl: bool,
    /// How many ACLs exist: zero lets every check skip the lock.
    count: AtomicUsize,
    acls: RwLock<Acls>,
    log: Option<Arc<InternalLog<AclOp>>>,
}

impl Authorizer {
    /// An authorizer in memory only, without ACLs (tests, tools).
    pub fn in_memory(super_users: Vec<String>, allow_if_no_acl: bool) -> Authorizer {
        Authorizer::with_state(super_users, allow_if_no_acl, Acls::new(), None)
    }

    fn with_state(
        super_users: Vec<String>,
        allow_if_no_acl: bool,
        acls: Acls,
        log: Option<Arc<InternalLog<AclOp>>>,
    ) -> Authorizer {
        Authorizer {
            generation: AtomicU64::new(0),
            // `User:alice` and `alice` both name alice.
            super_users: super_users
                .into_iter()
                .map(|s| s.strip_prefix("User:").map(str::to_string).unwrap_or(s))
                .collect(),
            allow_if_no_acl,
            count: AtomicUsize::new(acls.len()),
            acls: RwLock::new(acls),
            log,
        }
    }

    /// Opens the internal log `acls` and replays it. Blocking. The writer must run for
    /// changes to complete.
    pub fn open(
        broker: &Broker,
        super_users: Vec<String>,
        allow_if_no_acl: bool,
    ) -> Result<(Authorizer, InternalLogWriter<AclOp>), CoreError> {
        let (log, acls, writer) = InternalLog::<AclOp>::open(broker, ACLS_LOG)?;
        tracing::info!(acls = acls.len(), "ACLs replayed");
        Ok((
            Authorizer::with_state(super_users, allow_if_no_acl, acls, Some(log)),
            writer,
        ))
    }

    /// Bumped on every change of the ACLs.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// True when no ACL exists and unmatched resources are allowed: every check passes,
    /// so callers may skip their cache entirely.
    pub fn allows_everything(&self) -> bool {
        self.allow_if_no_acl && self.count.load(Ordering::Acquire) == 0
    }

    /// Whether `name` (without `User:`) is a super user.
    pub fn is_super_user(&self, principal: &Principal) -> bool {
        match principal {
            Principal::User(n) => self.super_users.iter().any(|s| **s == **n),
            Principal::Anonymous => self.super_users.iter().any(|s| s == "ANONYMOUS"),
        }
    }

    /// Whether `principal` connected from `host` may do `op` on the resource: super
    /// users may do anything; a matching DENY refuses; a matching ALLOW (or one of an
    /// implying operation) permits; when no ACL at all covers the resource,
    /// `allow_if_no_acl` decides; otherwise no.
    pub fn authorize(
        &self,
        principal: &Principal,
        host: IpAddr,
        op: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        if self.is_super_user(principal) {
            return true;
        }
        if self.count.load(Ordering::Acquire) == 0 {
            return self.allow_if_no_acl;
        }
        let acls = self.acls.read();
        let mut covered = false;
        let mut allowed = false;
        for acl in acls.iter() {
            if acl.resource_type != resource_type || !resource_matches(acl, name) {
                continue;
            }
            covered = true;
            if !principal_matches(acl, principal) || !host_matches(acl, host) {
                continue;
            }
            match acl.permission {
                Permission::Deny if deny_covers(acl.operation, op) => return false,
                Permission::Allow if allow_covers(acl.operation, op) => allowed = true,
                _ => {}
            }
        }
        if covered {
            allowed
        } else {
            self.allow_if_no_acl
        }
    }

    /// Whether `principal` may do `op` on at least one resource of the type (Kafka's
    /// `Authorizer.authorizeByResourceType`, used where any one topic is enough, as for an
    /// idempotent producer without IdempotentWrite on the cluster). Operations are not
    /// implied here, as in Kafka; a DENY only cancels the ALLOWs it dominates (a literal
    /// of the same name, or a prefix of the allowed name).
    pub fn authorize_any(
        &self,
        principal: &Principal,
        host: IpAddr,
        op: Operation,
        resource_type: ResourceType,
    ) -> bool {
        // Kafka asks about a made-up name first: that lets super users, `*` ALLOWs and
        // "no ACL found" through without walking the ACLs.
        if self.authorize(principal, host, op, resource_type, "hardcode") {
            return true;
        }
        let acls = self.acls.read();
        let mut denied_literals = HashSet::new();
        let mut denied_prefixes = HashSet::new();
        let mut allowed = Vec::new();
        let mut wildcard_allowed = false;
        for acl in acls.iter() {
            if acl.resource_type != resource_type
                || !principal_matches(acl, principal)
                || !host_matches(acl, host)
                || !deny_covers(acl.operation, op)
            {
                continue;
            }
            match (acl.permission, acl.pattern) {
                (Permission::Deny, PatternType::Literal) if acl.resource_name == WILDCARD => {
                    return false
                }
                (Permission::Deny, PatternType::Literal) => {
                    denied_literals.insert(acl.resource_name.as_str());
                }
                (Permission::Deny, PatternType::Prefixed) => {
                    denied_prefixes.insert(acl.resource_name.as_str());
                }
                // Not returned at once: a wildcard DENY later in the walk still wins.
                (Permission::Allow, _) if acl.resource_name == WILDCARD => wildcard_allowed = true,
                (Permission::Allow, pattern) => allowed.push((pattern, acl.resource_name.as_str())),
            }
        }
        wildcard_allowed
            || allowed.iter().any(|(pattern, name)| {
                let literal_denied =
                    *pattern == PatternType::Literal && denied_literals.contains(name);
                let prefix_denied = name
                    .char_indices()
                    .map(|(i, c)| &name[..i + c.len_utf8()])
                    .any(|prefix| denied_prefixes.contains(prefix));
                !literal_denied && !prefix_denied
            })
    }

    /// Adds ACLs (already present ones are no-ops), durably. One result per binding:
    /// an invalid binding gets its error, the others are added.
    pub async fn create(&self, bindings: Vec<AclBinding>) -> Vec<Result<(), CoreError>> {
        let mut results: Vec<Result<(), CoreError>> = bindings.iter().map(validate).collect();
        let stored = {
            let mut acls = self.acls.write();
            let mut ops = Vec::new();
            for (acl, result) in bindings.into_iter().zip(&results) {
                if result.is_ok() && acls.insert(acl.clone()) {
                    ops.push(AclOp::Add(acl));
                }
            }
            self.changed(&acls, ops)
        };
        if let Err(e) = stored.stored().await {
            for r in results.iter_mut().filter(|r| r.is_ok()) {
                *r = Err(e.same());
            }
        }
        results
    }

    /// Removes the ACLs each filter matches, durably; returns what each one removed.
    pub async fn delete(&self, filters: Vec<AclFilter>) -> Result<Vec<Vec<AclBinding>>, CoreError> {
        let (removed, stored) = {
            let mut acls = self.acls.write();
            let mut removed = Vec::with_capacity(filters.len());
            let mut ops = Vec::new();
            for f in &filters {
                let matched: Vec<AclBinding> =
                    acls.iter().filter(|a| f.matches(a)).cloned().collect();
                for a in &matched {
                    acls.remove(a);
                    ops.push(AclOp::Remove(a.clone()));
                }
                removed.push(matched);
            }
            let stored = self.changed(&acls, ops);
            (removed, stored)
        };
        stored.stored().await?;
        Ok(removed)
    }

    /// After `ops` were applied to `acls` (under its write lock): counts, bumps the
    /// generation and queues them for the log.
    fn changed(&self, acls: &Acls, ops: Vec<AclOp>) -> Ticket {
        if ops.is_empty() {
            return Ticket::ready();
        }
        self.count.store(acls.len(), Ordering::Release);
        self.generation.fetch_add(1, Ordering::AcqRel);
        match &self.log {
            Some(log) => log.push(ops, true),
            None => Ticket::ready(),
        }
    }

    /// The ACLs `filter` matches.
    pub fn describe(&self, filter: &AclFilter) -> Vec<AclBinding> {
        self.acls
            .read()
            .iter()
            .filter(|a| filter.matches(a))
            .cloned()
            .collect()
    }

    /// Waits until every change so far is stored.
    pub async fn flush(&self) -> Result<(), CoreError> {
        match &self.log {
            Some(log) => log.flush().await,
            None => Ok(()),
        }
    }
}

#[cfg(test)]
#[path = "acl_tests.rs"]
mod tests;
