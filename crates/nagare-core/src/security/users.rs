//! The one user store: each user has a PLAIN credential (salted PBKDF2 hash) and SCRAM
//! credentials (SHA-256 and SHA-512, RFC 5802/7677: salt, iterations, StoredKey,
//! ServerKey), never the password itself. Persisted in an internal log.
//!
//! The forward protocol is the exception: its handshake hashes the password with a salt
//! the server picks per connection, so the server must hold the password in a usable
//! form. Only users created with `forward` get such a secret, kept apart from the
//! credentials Kafka and STOMP use (see SECURITY.md for the trade-off).

use crate::CoreError;

use super::scram::{ScramCredential, ScramMechanism};

/// What `nagare user list` and DescribeUserScramCredentials show of a user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    /// SCRAM mechanisms and their iteration counts.
    pub scram: Vec<(ScramMechanism, u32)>,
    pub plain: bool,
    pub forward: bool,
}

pub struct UserStore {}

impl UserStore {
    /// Skeleton constructor (in memory, empty).
    pub fn in_memory() -> UserStore {
        UserStore {}
    }

    /// Creates or replaces a user's PLAIN and SCRAM-SHA-256/512 credentials from a
    /// password (and the forward secret when `forward`), durably.
    pub async fn add(&self, _name: &str, _password: &str, _forward: bool) -> Result<(), CoreError> {
        Ok(())
    }

    /// Sets one SCRAM credential from a salted password (Kafka's AlterUserScramCredentials
    /// upsertion), durably.
    pub async fn upsert_scram(
        &self,
        _name: &str,
        _mechanism: ScramMechanism,
        _iterations: u32,
        _salt: &[u8],
        _salted_password: &[u8],
    ) -> Result<(), CoreError> {
        Ok(())
    }

    /// Removes one SCRAM credential; `Ok(false)` when the user had none of that kind.
    pub async fn delete_scram(
        &self,
        _name: &str,
        _mechanism: ScramMechanism,
    ) -> Result<bool, CoreError> {
        Ok(false)
    }

    /// Removes a user and every credential; `Ok(false)` when there was no such user.
    pub async fn delete(&self, _name: &str) -> Result<bool, CoreError> {
        Ok(false)
    }

    /// Every user, by name.
    pub fn list(&self) -> Vec<UserInfo> {
        Vec::new()
    }

    /// Checks a password against the user's PLAIN credential (PLAIN, STOMP, HTTP basic).
    /// CPU-heavy (PBKDF2): call it off the hot path of other connections if needed.
    pub fn verify_plain(&self, _name: &str, _password: &str) -> bool {
        false
    }

    /// The user's SCRAM credential for `mechanism`.
    pub fn scram(&self, _name: &str, _mechanism: ScramMechanism) -> Option<ScramCredential> {
        None
    }

    /// The forward protocol's secret for `name` (only users added with `forward`).
    pub fn forward_password(&self, _name: &str) -> Option<String> {
        None
    }

    /// Whether any user exists (the forward handshake asks for users only then).
    pub fn is_empty(&self) -> bool {
        true
    }
}
