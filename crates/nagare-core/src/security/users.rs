//! The one user store: each user has a PLAIN credential (salted PBKDF2 hash) and SCRAM
//! credentials (SHA-256 and SHA-512, RFC 5802/7677: salt, iterations, StoredKey,
//! ServerKey), never the password itself. Persisted in the internal log `users`.
//!
//! The forward protocol is the exception: its handshake hashes the password with a salt
//! the server picks per connection, so the server must hold the password in a usable
//! form. Only users created with `forward` get such a secret, kept apart from the
//! credentials Kafka and STOMP use, in its own internal log `forward_secrets` whose
//! directory only the broker's user may read (see SECURITY.md for the trade-off).

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};

use super::crypto;
use super::scram::{ScramCredential, ScramMechanism};
use crate::internal_log::{InternalLog, InternalLogWriter, InternalOp, Ticket};
use crate::{Broker, CoreError};

/// The internal log holding PLAIN and SCRAM credentials (`DATA/__nagare_users-0`).
pub const USERS_LOG: &str = "users";
/// The internal log holding forward users' passwords (`DATA/__nagare_forward_secrets-0`).
pub const FORWARD_SECRETS_LOG: &str = "forward_secrets";
/// PBKDF2 rounds of PLAIN credentials and of SCRAM ones made from a password (Kafka's
/// default for SCRAM).
pub const DEFAULT_ITERATIONS: u32 = 4096;
/// The iteration range Kafka accepts in AlterUserScramCredentials.
pub const MIN_SCRAM_ITERATIONS: u32 = 4096;
pub const MAX_SCRAM_ITERATIONS: u32 = 16384;
const SALT_LEN: usize = 32;
/// Longest user name accepted.
const MAX_NAME_LEN: usize = 256;
/// Longest password accepted (PBKDF2 hashes it once per round: keep it bounded).
pub const MAX_PASSWORD_LEN: usize = 1024;
/// Checking a PLAIN credential: PBKDF2-HMAC-SHA512.
const PLAIN_HASH: ScramMechanism = ScramMechanism::Sha512;

/// What `nagare user list` and DescribeUserScramCredentials show of a user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    /// SCRAM mechanisms and their iteration counts.
    pub scram: Vec<(ScramMechanism, u32)>,
    pub plain: bool,
    pub forward: bool,
}

/// A PLAIN password's salted PBKDF2-HMAC-SHA512 hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct PlainCredential {
    #[serde(with = "hex::serde")]
    salt: Vec<u8>,
    iterations: u32,
    #[serde(with = "hex::serde")]
    hash: Vec<u8>,
}

impl PlainCredential {
    fn new(password: &str) -> PlainCredential {
        let salt = crypto::random_bytes(SALT_LEN);
        let hash = crypto::pbkdf2(PLAIN_HASH, password.as_bytes(), &salt, DEFAULT_ITERATIONS);
        PlainCredential {
            salt,
            iterations: DEFAULT_ITERATIONS,
            hash,
        }
    }

    /// Same work whatever the answer.
    fn verify(&self, password: &str) -> bool {
        let hash = crypto::pbkdf2(PLAIN_HASH, password.as_bytes(), &self.salt, self.iterations);
        crypto::ct_eq(&hash, &self.hash)
    }
}

/// Every credential of one user.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Credentials {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    plain: Option<PlainCredential>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    scram_sha_256: Option<ScramCredential>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    scram_sha_512: Option<ScramCredential>,
}

impl Credentials {
    fn from_password(password: &str) -> Credentials {
        Credentials {
            plain: Some(PlainCredential::new(password)),
            scram_sha_256: Some(ScramCredential::from_password(
                ScramMechanism::Sha256,
                password,
                DEFAULT_ITERATIONS,
            )),
            scram_sha_512: Some(ScramCredential::from_password(
                ScramMechanism::Sha512,
                password,
                DEFAULT_ITERATIONS,
            )),
        }
    }

    fn scram(&self, mechanism: ScramMechanism) -> &Option<ScramCredential> {
        match mechanism {
            ScramMechanism::Sha256 => &self.scram_sha_256,
            ScramMechanism::Sha512 => &self.scram_sha_512,
        }
    }

    fn scram_mut(&mut self, mechanism: ScramMechanism) -> &mut Option<ScramCredential> {
        match mechanism {
            ScramMechanism::Sha256 => &mut self.scram_sha_256,
            ScramMechanism::Sha512 => &mut self.scram_sha_512,
        }
    }

    fn is_empty(&self) -> bool {
        self.plain.is_none() && self.scram_sha_256.is_none() && self.scram_sha_512.is_none()
    }
}

type Users = BTreeMap<String, Credentials>;

#[path = "users_persist.rs"]
mod persist;
use persist::{ForwardOp, UserOp};

type ForwardSecrets = BTreeMap<String, String>;

/// The user store's background writers; run them on the runtime
/// ([`UserStoreWriters::run`]). Nothing is stored until they run.
#[must_use = "nothing is stored until the writers run"]
pub struct UserStoreWriters {
    users: InternalLogWriter<UserOp>,
    forward: InternalLogWriter<ForwardOp>,
}

impl UserStoreWriters {
    /// Runs both writers until the store is dropped.
    pub async fn run(self) {
        tokio::join!(self.users.run(), self.forward.run());
    }
}

pub struct UserStore {
    users: RwLock<Users>,
    forward: RwLock<ForwardSecrets>,
    users_log: Option<Arc<InternalLog<UserOp>>>,
    forward_log: Option<Arc<InternalLog<ForwardOp>>>,
    /// Checked against for unknown users, so they cost what known ones do.
    dummy_plain: PlainCredential,
    /// Keys the made-up salts of SCRAM exchanges for unknown users (stable per user
    /// within a process, so asking twice does not reveal that the user is made up).
    fake_salt_key: Vec<u8>,
}

impl UserStore {
    /// A store in memory only, empty (tests, tools).
    pub fn in_memory() -> UserStore {
        UserStore::with_state(Users::new(), ForwardSecrets::new(), None, None)
    }

    fn with_state(
        users: Users,
        forward: ForwardSecrets,
        users_log: Option<Arc<InternalLog<UserOp>>>,
        forward_log: Option<Arc<InternalLog<ForwardOp>>>,
    ) -> UserStore {
        UserStore {
            users: RwLock::new(users),
            forward: RwLock::new(forward),
            users_log,
            forward_log,
            dummy_plain: PlainCredential::new(&hex::encode(crypto::random_bytes(16))),
            fake_salt_key: crypto::random_bytes(32),
        }
    }

    /// Opens the internal logs `users` and `forward_secrets` and replays them. Blocking.
    /// The writers must run for changes to complete.
    pub fn open(broker: &Broker) -> Result<(UserStore, UserStoreWriters), CoreError> {
        let (users_log, users, users_writer) = InternalLog::<UserOp>::open(broker, USERS_LOG)?;
        let (forward_log, forward, forward_writer) =
            InternalLog::<ForwardOp>::open(broker, FORWARD_SECRETS_LOG)?;
        restrict_to_owner(&broker.data_dir().join(format!("__nagare_{USERS_LOG}-0")))?;
        restrict_to_owner(
            &broker
                .data_dir()
                .join(format!("__nagare_{FORWARD_SECRETS_LOG}-0")),
        )?;
        tracing::info!(
            users = users.len(),
            forward_users = forward.len(),
            "user store replayed"
        );
        let store = UserStore::with_state(users, forward, Some(users_log), Some(forward_log));
        Ok((
            store,
            UserStoreWriters {
                users: users_writer,
                forward: forward_writer,
            },
        ))
    }

    /// Creates or replaces a user's PLAIN and SCRAM-SHA-256/512 credentials from a
    /// password (and the forward secret when `forward`; a user re-added without it loses
    /// it), durably.
    pub async fn add(&self, name: &str, password: &str, forward: bool) -> Result<(), CoreError> {
        validate_name(name)?;
        validate_password(name, password)?;
        let pw = password.to_string();
        // Three PBKDF2 runs: milliseconds of CPU, kept off the runtime's threads.
        let credentials = tokio::task::spawn_blocking(move || Credentials::from_password(&pw))
            .await
            .map_err(|_| CoreError::ShuttingDown)?;
        let secret_stored = {
            let mut secrets = self.forward.write();
            let op = if forward {
                Some(ForwardOp::Set {
                    name: name.to_string(),
                    password: password.to_string(),
                })
            } else if secrets.contains_key(name) {
                Some(ForwardOp::Delete {
                    name: name.to_string(),
                })
            } else {
                None
            };
            match op {
                Some(op) => push(&self.forward_log, &mut secrets, vec![op]),
                None => Ticket::ready(),
            }
        };
        let stored = {
            let mut users = self.users.write();
            push(
                &self.users_log,
                &mut users,
                UserOp::set_all(name, &credentials),
            )
        };
        secret_stored.stored().await?;
        stored.stored().await
    }

    /// Sets one SCRAM credential from a salted password (Kafka's AlterUserScramCredentials
    /// upsertion), durably. A user that did not exist is created with only that
    /// credential.
    pub async fn upsert_scram(
        &self,
        name: &str,
        mechanism: ScramMechanism,
        iterations: u32,
        salt: &[u8],
        salted_password: &[u8],
    ) -> Result<(), CoreError> {
        validate_name(name)?;
        let invalid = |reason: String| CoreError::InvalidUser {
            name: name.to_string(),
            reason,
        };
        if !(MIN_SCRAM_ITERATIONS..=MAX_SCRAM_ITERATIONS).contains(&iterations) {
            return Err(invalid(format!(
                "iterations must be between {MIN_SCRAM_ITERATIONS} and {MAX_SCRAM_ITERATIONS}, got {iterations}"
            )));
        }
        if salt.is_empty() || salt.len() > 1024 {
            return Err(invalid("the salt must hold 1 to 1024 bytes".into()));
        }
        if salted_password.len() != mechanism.hash_len() {
            return Err(invalid(format!(
                "a {} salted password has {} bytes, got {}",
                mechanism.sasl_name(),
                mechanism.hash_len(),
                salted_password.len()
            )));
        }
        let credential =
            ScramCredential::from_salted_password(mechanism, salted_password, salt, iterations);
        let stored = {
            let mut users = self.users.write();
            push(
                &self.users_log,
                &mut users,
                vec![UserOp {
                    name: name.to_string(),
                    slot: persist::Slot::Scram(mechanism, Some(credential)),
                }],
            )
        };
        stored.stored().await
    }

    /// Removes one SCRAM credential; `Ok(false)` when the user had none of that kind. A
    /// user left without any credential is removed.
    pub async fn delete_scram(
        &self,
        name: &str,
        mechanism: ScramMechanism,
    ) -> Result<bool, CoreError> {
        let stored = {
            let mut users = self.users.write();
            if !users
                .get(name)
                .is_some_and(|c| c.scram(mechanism).is_some())
            {
                return Ok(false);
            }
            push(
                &self.users_log,
                &mut users,
                vec![UserOp {
                    name: name.to_string(),
                    slot: persist::Slot::Scram(mechanism, None),
                }],
            )
        };
        stored.stored().await?;
        if !self.users.read().contains_key(name) {
            self.forget_forward_secret(name).await?;
        }
        Ok(true)
    }

    /// Removes a user and every credential; `Ok(false)` when there was no such user.
    pub async fn delete(&self, name: &str) -> Result<bool, CoreError> {
        let stored = {
            let mut users = self.users.write();
            if !users.contains_key(name) {
                return Ok(false);
            }
            push(&self.users_log, &mut users, UserOp::delete_all(name))
        };
        stored.stored().await?;
        self.forget_forward_secret(name).await?;
        Ok(true)
    }

    async fn forget_forward_secret(&self, name: &str) -> Result<(), CoreError> {
        let stored = {
            let mut secrets = self.forward.write();
            if !secrets.contains_key(name) {
                return Ok(());
            }
            push(
                &self.forward_log,
                &mut secrets,
                vec![ForwardOp::Delete {
                    name: name.to_string(),
                }],
            )
        };
        stored.stored().await
    }

    /// Every user, by name.
    pub fn list(&self) -> Vec<UserInfo> {
        let users = self.users.read();
        let secrets = self.forward.read();
        users
            .iter()
            .map(|(name, c)| UserInfo {
                name: name.clone(),
                scram: [ScramMechanism::Sha256, ScramMechanism::Sha512]
                    .into_iter()
                    .filter_map(|m| c.scram(m).as_ref().map(|s| (m, s.iterations)))
                    .collect(),
                plain: c.plain.is_some(),
                forward: secrets.contains_key(name),
            })
            .collect()
    }

    /// One user, when it exists.
    pub fn get(&self, name: &str) -> Option<UserInfo> {
        self.list().into_iter().find(|u| u.name == name)
    }

    /// The PLAIN credential to check `name` against: the user's, or a dummy one (same
    /// cost) and `false` for an unknown user or one without a PLAIN credential.
    fn plain_credential(&self, name: &str) -> (PlainCredential, bool) {
        match self.users.read().get(name).and_then(|c| c.plain.clone()) {
            Some(c) => (c, true),
            None => (self.dummy_plain.clone(), false),
        }
    }

    /// Checks a password against the user's PLAIN credential (PLAIN, STOMP, HTTP basic).
    /// CPU-heavy (PBKDF2, a few milliseconds): async callers use
    /// [`verify_plain_async`](Self::verify_plain_async). An unknown user costs the same
    /// as a wrong password, and the hash comparison is constant-time.
    pub fn verify_plain(&self, name: &str, password: &str) -> bool {
        if password.len() > MAX_PASSWORD_LEN {
            return false;
        }
        let (credential, known) = self.plain_credential(name);
        credential.verify(password) && known
    }

    /// [`verify_plain`](Self::verify_plain) with the hashing on the blocking pool, so
    /// other connections of the same runtime thread do not wait for it.
    pub async fn verify_plain_async(&self, name: &str, password: &str) -> bool {
        if password.len() > MAX_PASSWORD_LEN {
            return false;
        }
        let (credential, known) = self.plain_credential(name);
        let password = password.to_string();
        let ok = tokio::task::spawn_blocking(move || credential.verify(&password))
            .await
            .unwrap_or(false);
        ok && known
    }

    /// The user's SCRAM credential for `mechanism`.
    pub fn scram(&self, name: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        self.users.read().get(name)?.scram(mechanism).clone()
    }

    /// A credential no password matches, with a salt stable per (user, mechanism): what
    /// a SCRAM exchange for an unknown user runs against, so the server-first message
    /// does not tell that the user does not exist.
    pub(crate) fn fake_scram(&self, name: &str, mechanism: ScramMechanism) -> ScramCredential {
        let mut input = mechanism.sasl_name().as_bytes().to_vec();
        input.push(0);
        input.extend_from_slice(name.as_bytes());
        let mut salt = crypto::hmac(ScramMechanism::Sha256, &self.fake_salt_key, &input);
        salt.truncate(SALT_LEN);
        ScramCredential {
            salt,
            iterations: DEFAULT_ITERATIONS,
            stored_key: crypto::random_bytes(mechanism.hash_len()),
            server_key: crypto::random_bytes(mechanism.hash_len()),
        }
    }

    /// The forward protocol's secret for `name` (only users added with `forward`).
    pub fn forward_password(&self, name: &str) -> Option<String> {
        if !self.users.read().contains_key(name) {
            return None;
        }
        self.forward.read().get(name).cloned()
    }

    /// Whether any user exists (the forward handshake asks for users only then).
    pub fn is_empty(&self) -> bool {
        self.users.read().is_empty()
    }

    /// Waits until every change so far is stored (on shutdown, or before an offline
    /// tool exits).
    pub async fn flush(&self) -> Result<(), CoreError> {
        if let Some(log) = &self.users_log {
            log.flush().await?;
        }
        if let Some(log) = &self.forward_log {
            log.flush().await?;
        }
        Ok(())
    }
}

/// Applies `ops` to `state` and queues them (durably) in `log`, in that order under the
/// caller's lock, so the log sees changes in the order they were made.
fn push<O: InternalOp + Clone>(
    log: &Option<Arc<InternalLog<O>>>,
    state: &mut O::State,
    ops: Vec<O>,
) -> Ticket {
    for op in &ops {
        op.clone().apply(state);
    }
    match log {
        Some(log) => log.push(ops, true),
        None => Ticket::ready(),
    }
}

/// User names: 1 to 256 bytes, no control characters, and not one of the names with a
/// meaning of their own in ACLs (`*`, `ANONYMOUS`).
pub fn validate_name(name: &str) -> Result<(), CoreError> {
    let reason = if name.is_empty() {
        "a user name must not be empty"
    } else if name.len() > MAX_NAME_LEN {
        "a user name has at most 256 bytes"
    } else if name.chars().any(char::is_control) {
        "a user name must not contain control characters"
    } else if name == "*" || name == "ANONYMOUS" {
        "this name is reserved (ACL wildcard / anonymous principal)"
    } else {
        return Ok(());
    };
    Err(CoreError::InvalidUser {
        name: name.to_string(),
        reason: reason.to_string(),
    })
}

fn validate_password(name: &str, password: &str) -> Result<(), CoreError> {
    let reason = if password.is_empty() {
        "the password must not be empty"
    } else if password.len() > MAX_PASSWORD_LEN {
        "the password has at most 1024 bytes"
    } else {
        return Ok(());
    };
    Err(CoreError::InvalidUser {
        name: name.to_string(),
        reason: reason.to_string(),
    })
}

/// Makes a credentials directory readable by the broker's user only.
fn restrict_to_owner(dir: &std::path::Path) -> Result<(), CoreError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| CoreError::io(dir, e))
}

#[cfg(test)]
#[path = "users_tests.rs"]
mod tests;
