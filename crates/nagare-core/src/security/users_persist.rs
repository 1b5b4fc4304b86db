//! How the user store is kept in its internal logs, keyed so that the latest record of a
//! key is its state (what the log cleaner keeps):
//! - `users`: one record per credential, keyed by user and mechanism (JSON
//!   `{"user":…,"mechanism":"PLAIN"|"SCRAM-SHA-256"|"SCRAM-SHA-512"}`), the value the
//!   credential (JSON) or a tombstone once removed; a user exists while it has one.
//! - `forward_secrets`: keyed by user, the value the secret, a tombstone once removed.
//!
//! Earlier versions keyed `users` records by user name alone, each value an operation
//! on some of its credentials ([`LegacyUserOp`]): still read, and such a log is rewritten
//! once on open (see `internal_log.rs`). Their forward secrets were removed with a
//! `delete` record instead of a tombstone: still read, and harmless to the cleaner (the
//! latest record of the user still says it is gone).

use bytes::Bytes;
use nagare_log::batch::{NewRecord, Record};
use serde::{Deserialize, Serialize};

use super::{Credentials, ForwardSecrets, PlainCredential, Users};
use crate::internal_log::{InternalOp, Replayed};
use crate::security::scram::{ScramCredential, ScramMechanism};

/// One credential of one user, or its removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct UserOp {
    pub name: String,
    pub slot: Slot,
}

/// Which credential, and its new value (`None`: removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Slot {
    Plain(Option<PlainCredential>),
    Scram(ScramMechanism, Option<ScramCredential>),
}

#[derive(Serialize, Deserialize)]
struct UserKey {
    user: String,
    mechanism: String,
}

const PLAIN: &str = "PLAIN";

impl UserOp {
    /// Sets every credential of `name` to `credentials` (removing those it lacks).
    pub(super) fn set_all(name: &str, credentials: &Credentials) -> Vec<UserOp> {
        let op = |slot| UserOp {
            name: name.to_string(),
            slot,
        };
        vec![
            op(Slot::Plain(credentials.plain.clone())),
            op(Slot::Scram(
                ScramMechanism::Sha256,
                credentials.scram_sha_256.clone(),
            )),
            op(Slot::Scram(
                ScramMechanism::Sha512,
                credentials.scram_sha_512.clone(),
            )),
        ]
    }

    /// Removes every credential of `name`, and so the user.
    pub(super) fn delete_all(name: &str) -> Vec<UserOp> {
        UserOp::set_all(name, &Credentials::default())
    }

    fn mechanism(&self) -> &'static str {
        match &self.slot {
            Slot::Plain(_) => PLAIN,
            Slot::Scram(m, _) => m.sasl_name(),
        }
    }
}

impl InternalOp for UserOp {
    type State = Users;
    const COMPACT_MIN_RECORDS: i64 = 1_000;

    fn key(&self) -> Bytes {
        let key = UserKey {
            user: self.name.clone(),
            mechanism: self.mechanism().to_string(),
        };
        // A struct of two strings always serializes.
        serde_json::to_vec(&key)
            .map(Bytes::from)
            .unwrap_or_default()
    }

    fn encode(&self, timestamp: i64) -> NewRecord {
        let value = match &self.slot {
            Slot::Plain(c) => c.as_ref().and_then(|c| serde_json::to_vec(c).ok()),
            Slot::Scram(_, c) => c.as_ref().and_then(|c| serde_json::to_vec(c).ok()),
        };
        NewRecord {
            key: Some(self.key()),
            value: value.map(Bytes::from),
            headers: Vec::new(),
            timestamp,
        }
    }

    fn decode(record: &Record) -> Option<Self> {
        let key: UserKey = serde_json::from_slice(record.key.as_deref()?).ok()?;
        let value = record.value.as_deref();
        let slot = match key.mechanism.as_str() {
            PLAIN => Slot::Plain(match value {
                None => None,
                Some(v) => Some(serde_json::from_slice(v).ok()?),
            }),
            sasl => {
                let mechanism = [ScramMechanism::Sha256, ScramMechanism::Sha512]
                    .into_iter()
                    .find(|m| m.sasl_name() == sasl)?;
                Slot::Scram(
                    mechanism,
                    match value {
                        None => None,
                        Some(v) => Some(serde_json::from_slice(v).ok()?),
                    },
                )
            }
        };
        Some(UserOp {
            name: key.user,
            slot,
        })
    }

    fn replay(record: &Record, users: &mut Users) -> Replayed {
        // An earlier version's value is tagged with `op`; no credential is.
        let legacy = record
            .value
            .as_deref()
            .and_then(|v| serde_json::from_slice::<LegacyUserOp>(v).ok());
        if let Some(op) = legacy {
            op.into_ops().into_iter().for_each(|op| op.apply(users));
            return Replayed::Legacy;
        }
        match Self::decode(record) {
            Some(op) => {
                op.apply(users);
                Replayed::Current
            }
            None => Replayed::Unreadable,
        }
    }

    fn apply(self, users: &mut Users) {
        let c = users.entry(self.name.clone()).or_default();
        match self.slot {
            Slot::Plain(p) => c.plain = p,
            Slot::Scram(m, s) => *c.scram_mut(m) = s,
        }
        if c.is_empty() {
            users.remove(&self.name);
        }
    }

    fn snapshot(users: &Users) -> Vec<Self> {
        users
            .iter()
            .flat_map(|(name, c)| UserOp::set_all(name, c))
            .filter(|op| match &op.slot {
                Slot::Plain(p) => p.is_some(),
                Slot::Scram(_, s) => s.is_some(),
            })
            .collect()
    }
}

/// A record of an earlier version's `users` log (JSON, keyed by the user name).
#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum LegacyUserOp {
    Set {
        name: String,
        credentials: Credentials,
    },
    SetScram {
        name: String,
        mechanism: ScramMechanism,
        credential: ScramCredential,
    },
    DeleteScram {
        name: String,
        mechanism: ScramMechanism,
    },
    Delete {
        name: String,
    },
}

impl LegacyUserOp {
    /// The same change as keyed operations.
    fn into_ops(self) -> Vec<UserOp> {
        match self {
            LegacyUserOp::Set { name, credentials } => UserOp::set_all(&name, &credentials),
            LegacyUserOp::SetScram {
                name,
                mechanism,
                credential,
            } => vec![UserOp {
                name,
                slot: Slot::Scram(mechanism, Some(credential)),
            }],
            LegacyUserOp::DeleteScram { name, mechanism } => vec![UserOp {
                name,
                slot: Slot::Scram(mechanism, None),
            }],
            LegacyUserOp::Delete { name } => UserOp::delete_all(&name),
        }
    }
}

/// One change of the forward secrets (JSON, keyed by the user name; `Delete` is stored
/// as a tombstone).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(super) enum ForwardOp {
    Set { name: String, password: String },
    Delete { name: String },
}

impl InternalOp for ForwardOp {
    type State = ForwardSecrets;
    const COMPACT_MIN_RECORDS: i64 = 1_000;

    fn key(&self) -> Bytes {
        let (ForwardOp::Set { name, .. } | ForwardOp::Delete { name }) = self;
        Bytes::copy_from_slice(name.as_bytes())
    }

    fn encode(&self, timestamp: i64) -> NewRecord {
        let value = match self {
            // Plain structs of strings always serialize.
            ForwardOp::Set { .. } => serde_json::to_vec(self).ok().map(Bytes::from),
            ForwardOp::Delete { .. } => None,
        };
        NewRecord {
            key: Some(self.key()),
            value,
            headers: Vec::new(),
            timestamp,
        }
    }

    fn decode(record: &Record) -> Option<Self> {
        match record.value.as_deref() {
            None => Some(ForwardOp::Delete {
                name: String::from_utf8(record.key.as_deref()?.to_vec()).ok()?,
            }),
            Some(v) => serde_json::from_slice(v).ok(),
        }
    }

    fn apply(self, secrets: &mut ForwardSecrets) {
        match self {
            ForwardOp::Set { name, password } => {
                secrets.insert(name, password);
            }
            ForwardOp::Delete { name } => {
                secrets.remove(&name);
            }
        }
    }

    fn snapshot(secrets: &ForwardSecrets) -> Vec<Self> {
        secrets
            .iter()
            .map(|(name, password)| ForwardOp::Set {
                name: name.clone(),
                password: password.clone(),
            })
            .collect()
    }
}
