//! Per-connection memory of the authorizer's answers, so the hot path (a produce to the
//! same topic, again and again) costs a hash lookup without allocating, and nothing at
//! all while every check passes by default.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use super::{Authorizer, Operation, Principal, ResourceType};

/// Decisions remembered per connection at most; past that the cache starts over (a
/// client walking through many topics costs lookups, not memory).
const MAX_DECISIONS: usize = 4096;

/// One connection's decisions, forgotten when the ACLs change.
pub struct AclCache {
    authorizer: Arc<Authorizer>,
    principal: Principal,
    host: IpAddr,
    generation: u64,
    /// By (operation, resource type), then resource name: looked up with a `&str`.
    decisions: HashMap<(Operation, ResourceType), HashMap<Box<str>, bool>>,
    len: usize,
}

impl AclCache {
    pub fn new(authorizer: Arc<Authorizer>, principal: Principal, host: IpAddr) -> AclCache {
        let generation = authorizer.generation();
        AclCache {
            authorizer,
            principal,
            host,
            generation,
            decisions: HashMap::new(),
            len: 0,
        }
    }

    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// After a login: the new principal, and nothing remembered from before.
    pub fn set_principal(&mut self, principal: Principal) {
        self.principal = principal;
        self.forget();
    }

    fn forget(&mut self) {
        self.decisions.clear();
        self.len = 0;
    }

    /// Whether this connection may do `op` on the resource.
    pub fn allowed(&mut self, op: Operation, resource_type: ResourceType, name: &str) -> bool {
        if self.authorizer.allows_everything() {
            return true;
        }
        let generation = self.authorizer.generation();
        if generation != self.generation {
            self.forget();
            self.generation = generation;
        }
        if let Some(d) = self
            .decisions
            .get(&(op, resource_type))
            .and_then(|names| names.get(name))
        {
            return *d;
        }
        let d = self
            .authorizer
            .authorize(&self.principal, self.host, op, resource_type, name);
        if self.len >= MAX_DECISIONS {
            self.forget();
        }
        self.decisions
            .entry((op, resource_type))
            .or_default()
            .insert(Box::from(name), d);
        self.len += 1;
        d
    }
}
