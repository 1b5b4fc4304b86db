//! Who a STOMP connection is and what it may touch.
//!
//! Authentication is CONNECT's `login`/`passcode`, checked against the broker's user store
//! (or the listener's fixed `[stomp] login`/`passcode`), as RabbitMQ does:
//! - a listener with `auth_required` refuses a CONNECT without valid credentials, unless
//!   the listener already knows the peer from its TLS client certificate;
//! - without `auth_required`, a CONNECT without credentials is anonymous, and one with
//!   credentials still has them checked (a wrong password is refused), so that user's
//!   ACLs apply.
//!
//! A refused login waits what [`LoginThrottle`](nagare_core::security::LoginThrottle) says
//! and is answered with one ERROR that does not say whether the user exists.
//!
//! Authorization maps destinations onto the topic they are stored in:
//! - SEND to `/topic/T` needs Write on topic `T`, SUBSCRIBE needs Read on it;
//! - `/queue/Q` lives in topic `queue.Q`: SEND needs Write on it, SUBSCRIBE Read. No group
//!   ACL is asked for: a queue's acknowledgement state belongs to the queue alone (no
//!   client names it as a group), so Read on its topic is the whole permission, like
//!   RabbitMQ's read permission on a queue;
//! - `/temp-queue/NAME` and `/reply-queue/ID` need none: a temp queue is in memory and
//!   private to its connection, and its reply id, handed out only in `reply-to`, carries
//!   64 random bits: knowing it is the permission to reply, as with RabbitMQ's direct
//!   reply-to.
//!
//! Decisions are remembered per connection ([`AclCache`]) and skipped entirely while the
//! authorizer allows everything.

use std::net::IpAddr;

use nagare_core::security::{AclCache, Operation, Principal, ResourceType, Security};

use crate::config::Config;
use crate::dest::Dest;
use crate::error::StompError;

/// One connection's identity and its ACL decisions.
pub(crate) struct Access {
    security: Security,
    peer: IpAddr,
    /// The listener demands authentication.
    required: bool,
    /// Who the listener knew the peer to be (a TLS client certificate), before CONNECT.
    listener_principal: Principal,
    acl: AclCache,
}

impl Access {
    pub(crate) fn new(
        security: Security,
        peer: IpAddr,
        principal: Principal,
        required: bool,
    ) -> Access {
        let acl = AclCache::new(security.authorizer.clone(), principal.clone(), peer);
        Access {
            security,
            peer,
            required,
            listener_principal: principal,
            acl,
        }
    }

    pub(crate) fn principal(&self) -> &Principal {
        self.acl.principal()
    }

    /// Checks CONNECT's credentials; on success the connection acts as the user they name.
    /// The password hash (PBKDF2) runs on the blocking pool, not on the thread serving
    /// other connections. A refusal has already waited the throttle's delay.
    pub(crate) async fn login(
        &mut self,
        login: Option<&str>,
        passcode: Option<&str>,
        config: &Config,
    ) -> Result<(), StompError> {
        // Clients without credentials often send them empty (the Ruby gem does).
        let login = login.filter(|l| !l.is_empty());
        let fixed = !config.login.is_empty() || !config.passcode.is_empty();
        let Some(user) = login else {
            let known = self.listener_principal != Principal::Anonymous;
            if known || (!self.required && !fixed) {
                return Ok(());
            }
            return Err(self.refuse("").await);
        };
        let passcode = passcode.unwrap_or("");
        let ok = (fixed && user == config.login && passcode == config.passcode)
            || self.security.users.verify_plain_async(user, passcode).await;
        if !ok {
            return Err(self.refuse(user).await);
        }
        self.security.throttle.succeeded(self.peer);
        self.acl.set_principal(Principal::user(user));
        Ok(())
    }

    async fn refuse(&self, user: &str) -> StompError {
        let delay = self.security.throttle.failed("stomp", self.peer, user);
        tokio::time::sleep(delay).await;
        StompError::AuthenticationFailed
    }

    /// Whether this connection may SEND to (`Write`) or SUBSCRIBE to (`Read`) `dest`.
    pub(crate) fn authorize(&mut self, op: Operation, dest: &Dest) -> Result<(), StompError> {
        if self.security.authorizer.allows_everything() {
            return Ok(());
        }
        let topic = match dest {
            Dest::Topic(name) => std::borrow::Cow::Borrowed(name.as_str()),
            Dest::Queue(_) => match dest.topic_name() {
                Some(t) => std::borrow::Cow::Owned(t),
                None => return Ok(()),
            },
            Dest::TempQueue(_) | Dest::ReplyQueue(_) => return Ok(()),
        };
        if self.acl.allowed(op, ResourceType::Topic, &topic) {
            return Ok(());
        }
        Err(StompError::NotAuthorized {
            principal: self.principal().to_string(),
            operation: match op {
                Operation::Write => "Write",
                _ => "Read",
            },
            topic: topic.into_owned(),
            destination: dest.to_string(),
        })
    }
}
