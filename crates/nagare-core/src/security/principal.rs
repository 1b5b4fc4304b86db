//! Who is on the other end of a connection.

use std::fmt;
use std::sync::Arc;

/// An authenticated user, or nobody. Printed Kafka's way: `User:alice`, `User:ANONYMOUS`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum Principal {
    #[default]
    Anonymous,
    User(Arc<str>),
}

impl Principal {
    pub fn user(name: &str) -> Principal {
        Principal::User(Arc::from(name))
    }

    /// The user name (`ANONYMOUS` for nobody), without the `User:` prefix.
    pub fn name(&self) -> &str {
        match self {
            Principal::Anonymous => "ANONYMOUS",
            Principal::User(n) => n,
        }
    }

    /// Parses Kafka's `User:NAME` form (`User:ANONYMOUS` is [`Principal::Anonymous`]).
    pub fn parse(s: &str) -> Option<Principal> {
        let name = s.strip_prefix("User:")?;
        if name.is_empty() {
            return None;
        }
        Some(if name == "ANONYMOUS" {
            Principal::Anonymous
        } else {
            Principal::user(name)
        })
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "User:{}", self.name())
    }
}
