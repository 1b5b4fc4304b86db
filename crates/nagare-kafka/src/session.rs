//! Who one Kafka connection is: its peer, its principal (anonymous, a TLS client
//! certificate's, or the SASL user once authenticated) and its ACL decisions.
//!
//! Every handler receives the connection's [`Session`] beside the listener's shared
//! state. Handlers of one connection may run together (overlapping Produce requests), so
//! the mutable parts sit behind small locks held only for a check, never across an await.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};

use nagare_core::security::{AclCache, Operation, Principal, ResourceType, Security};
use nagare_listener::ConnectionInfo;
use parking_lot::Mutex;

use crate::sasl::SaslStage;

/// One connection's identity and authorization state.
pub(crate) struct Session {
    pub peer: SocketAddr,
    /// The listener demands authentication: until it succeeds, only ApiVersions and the
    /// SASL exchange are answered.
    pub auth_required: bool,
    /// The client has authenticated (SASL), or the listener already knew it (TLS client
    /// certificate).
    authenticated: AtomicBool,
    acl: Mutex<AclCache>,
    security: Security,
    /// Where the SASL exchange is.
    sasl: Mutex<SaslStage>,
    /// Close once the answers queued so far are written (a failed login).
    closing: AtomicBool,
    /// The connection's registry entry (client id, user), when served by a listener.
    info: Option<std::sync::Arc<ConnectionInfo>>,
}

impl Session {
    pub(crate) fn new(
        security: &Security,
        principal: Principal,
        peer: SocketAddr,
        auth_required: bool,
    ) -> Session {
        let known = principal != Principal::Anonymous;
        Session {
            peer,
            auth_required,
            authenticated: AtomicBool::new(known),
            acl: Mutex::new(AclCache::new(
                security.authorizer.clone(),
                principal,
                peer.ip(),
            )),
            security: security.clone(),
            sasl: Mutex::new(SaslStage::Start),
            closing: AtomicBool::new(false),
            info: None,
        }
    }

    /// Ties the session to its connection's registry entry.
    pub(crate) fn with_info(mut self, info: std::sync::Arc<ConnectionInfo>) -> Session {
        self.info = Some(info);
        self
    }

    /// Notes the client id of a request header in the connection registry.
    pub(crate) fn saw_client_id(&self, client_id: Option<&str>) {
        if let (Some(info), Some(id)) = (&self.info, client_id) {
            info.set_client_id(id);
        }
    }

    /// Takes the SASL stage out (leaving [`SaslStage::Over`]) for a handler to move along.
    pub(crate) fn take_sasl(&self) -> SaslStage {
        std::mem::replace(&mut *self.sasl.lock(), SaslStage::Over)
    }

    pub(crate) fn set_sasl(&self, stage: SaslStage) {
        *self.sasl.lock() = stage;
    }

    /// The connection closes after the answers queued so far.
    pub(crate) fn close_after_reply(&self) {
        self.closing.store(true, Ordering::Release);
    }

    pub(crate) fn closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    pub(crate) fn security(&self) -> &Security {
        &self.security
    }

    pub(crate) fn principal(&self) -> Principal {
        self.acl.lock().principal().clone()
    }

    /// Whether requests past the login exchange may be answered.
    pub(crate) fn may_proceed(&self) -> bool {
        !self.auth_required || self.authenticated.load(Ordering::Acquire)
    }

    /// After a successful login: the connection acts as `principal` from now on.
    pub(crate) fn authenticated_as(&self, principal: Principal) {
        if let (Some(info), Principal::User(user)) = (&self.info, &principal) {
            info.set_user(user);
        }
        self.acl.lock().set_principal(principal);
        self.authenticated.store(true, Ordering::Release);
    }

    /// Whether this connection may do `op` on the resource (cached per connection; free
    /// while the authorizer allows everything).
    pub(crate) fn allowed(&self, op: Operation, resource_type: ResourceType, name: &str) -> bool {
        if self.security.authorizer.allows_everything() {
            return true;
        }
        self.acl.lock().allowed(op, resource_type, name)
    }

    /// Whether this connection may do `op` on at least one resource of the type (Kafka's
    /// `authorizeByResourceType`). Not cached: only InitProducerId asks.
    pub(crate) fn allowed_on_any(&self, op: Operation, resource_type: ResourceType) -> bool {
        let authorizer = &self.security.authorizer;
        if authorizer.allows_everything() {
            return true;
        }
        let principal = self.principal();
        authorizer.authorize_any(&principal, self.peer.ip(), op, resource_type)
    }

    /// Kafka's authorized-operations bit field for a resource: bit `code` set for each
    /// operation of the type this connection may do.
    pub(crate) fn authorized_operations(&self, resource_type: ResourceType, name: &str) -> i32 {
        resource_type
            .supported_operations()
            .iter()
            .filter(|op| self.allowed(**op, resource_type, name))
            .fold(0, |bits, op| bits | 1 << op.kafka_code())
    }

    /// Shorthand for topic checks.
    pub(crate) fn topic_allowed(&self, op: Operation, topic: &str) -> bool {
        self.allowed(op, ResourceType::Topic, topic)
    }

    /// Shorthand for group checks.
    pub(crate) fn group_allowed(&self, op: Operation, group: &str) -> bool {
        self.allowed(op, ResourceType::Group, group)
    }

    /// Shorthand for cluster checks.
    pub(crate) fn cluster_allowed(&self, op: Operation) -> bool {
        self.allowed(
            op,
            ResourceType::Cluster,
            nagare_core::security::acl::CLUSTER_NAME,
        )
    }
}

#[cfg(test)]
impl Session {
    /// An anonymous loopback session on a listener without authentication.
    pub(crate) fn for_tests(state: &crate::KafkaState) -> std::sync::Arc<Session> {
        Session::as_user(state, Principal::Anonymous)
    }

    /// A loopback session already authenticated as `principal`.
    pub(crate) fn as_user(
        state: &crate::KafkaState,
        principal: Principal,
    ) -> std::sync::Arc<Session> {
        std::sync::Arc::new(Session::new(
            &state.security,
            principal,
            SocketAddr::from(([127, 0, 0, 1], 1)),
            false,
        ))
    }
}
