//! Per-connection memory of the authorizer's answers, so the hot path (a produce to the
//! same topic, again and again) costs a hash lookup, and nothing at all while every
//! check passes by default.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use super::{Authorizer, Operation, Principal, ResourceType};

/// One connection's decisions, forgotten when the ACLs change.
pub struct AclCache {
    authorizer: Arc<Authorizer>,
    principal: Principal,
    host: IpAddr,
    generation: u64,
    decisions: HashMap<(Operation, ResourceType, Box<str>), bool>,
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
        }
    }

    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// After a login: the new principal, and nothing remembered from before.
    pub fn set_principal(&mut self, principal: Principal) {
        self.principal = principal;
        self.decisions.clear();
    }

    /// Whether this connection may do `op` on the resource.
    pub fn allowed(&mut self, op: Operation, resource_type: ResourceType, name: &str) -> bool {
        let generation = self.authorizer.generation();
        if generation != self.generation {
            self.decisions.clear();
            self.generation = generation;
        }
        if let Some(d) = self.decisions.get(&(op, resource_type, Box::from(name))) {
            return *d;
        }
        let d = self
            .authorizer
            .authorize(&self.principal, self.host, op, resource_type, name);
        self.decisions
            .insert((op, resource_type, Box::from(name)), d);
        d
    }
}
