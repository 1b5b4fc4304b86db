//! Who may connect and what they may do, for every front end: one user store
//! ([`UserStore`]: PLAIN and SCRAM credentials, plus the forward protocol's secret), one
//! authorizer ([`Authorizer`]: Kafka-style ACLs) with a per-connection decision cache
//! ([`AclCache`]), and one place that slows down failed logins ([`LoginThrottle`]).
//!
//! The front ends authenticate with their protocol's mechanism (Kafka SASL, STOMP
//! `login`/`passcode`, the forward handshake, HTTP basic auth), then hold a [`Principal`]
//! and ask the authorizer before touching a topic, a group or the cluster.

pub mod acl;
mod acl_cache;
mod crypto;
mod login_throttle;
mod principal;
pub mod scram;
pub mod users;

use std::sync::Arc;

pub use acl::{
    AclBinding, AclFilter, Authorizer, Operation, PatternFilter, PatternType, Permission,
    ResourceType,
};
pub use acl_cache::AclCache;
pub use login_throttle::LoginThrottle;
pub use principal::Principal;
pub use users::{UserInfo, UserStore, UserStoreWriters};

/// Broker-wide security settings.
#[derive(Debug, Clone, Default)]
pub struct SecurityConfig {
    /// Every listener demands authentication unless it says otherwise (`--auth required`).
    pub auth_required: bool,
    /// Users that bypass ACLs (`--super-users alice,bob`), by name without `User:`.
    pub super_users: Vec<String>,
    /// What happens when no ACL matches a resource: `None` means "allow when auth is off,
    /// deny when it is on" (Kafka's `allow.everyone.if.no.acl.found`).
    pub allow_if_no_acl: Option<bool>,
}

impl SecurityConfig {
    /// The effective "allow when no ACL matches".
    pub fn allow_if_no_acl(&self) -> bool {
        self.allow_if_no_acl.unwrap_or(!self.auth_required)
    }
}

/// The security subsystem as the front ends receive it; cheap to clone.
#[derive(Clone)]
pub struct Security {
    pub config: Arc<SecurityConfig>,
    pub users: Arc<UserStore>,
    pub authorizer: Arc<Authorizer>,
    pub throttle: Arc<LoginThrottle>,
}
