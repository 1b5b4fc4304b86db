//! The shared-key handshake of the forward protocol:
//!
//! ```text
//! server: ["HELO", {"nonce": n, "auth": salt, "keepalive": true}]
//! client: ["PING", hostname, shared_key_salt,
//!          hex(sha512(shared_key_salt + hostname + n + shared_key)),
//!          username, hex(sha512(salt + username + password))]
//! server: ["PONG", ok, reason, self_hostname,
//!          hex(sha512(shared_key_salt + self_hostname + n + shared_key))]
//! ```
//! A wrong key or user gets a PONG with `ok = false` and the reason, then a disconnect.
//!
//! Users come from `[[forward.user]]` and from the broker's user store (users added with
//! `--forward`, whose secret the store keeps for this handshake only). When the listener
//! demands authentication the handshake is mandatory and asks for a user even if the
//! file names none; an unset `shared_key` then takes part in the digests as the empty
//! string, so senders configure `shared_key ""` (Fluentd's `<security>` always sends a
//! shared-key digest).

use nagare_core::security::UserStore;
use rand::RngCore;
use sha2::{Digest, Sha512};

use crate::config::User;
use crate::decode::Ping;

/// Whom a PING's user part is checked against.
pub struct Users<'a> {
    /// HELO asked for a user: a PING without a known one is refused.
    pub required: bool,
    /// `[[forward.user]]`, looked at first.
    pub config: &'a [User],
    /// The broker's user store (its forward secrets).
    pub store: Option<&'a UserStore>,
}

impl Users<'_> {
    /// The password `name` authenticates with in this handshake, if it is a user.
    fn password(&self, name: &[u8]) -> Option<String> {
        if let Some(u) = self.config.iter().find(|u| u.username.as_bytes() == name) {
            return Some(u.password.clone());
        }
        let name = std::str::from_utf8(name).ok()?;
        self.store?.forward_password(name)
    }
}

/// State of one connection's handshake.
pub struct Handshake {
    nonce: String,
    auth_salt: String,
}

/// The outcome of a PING: the PONG to send and whether the connection may go on.
pub struct Pong {
    pub bytes: Vec<u8>,
    pub ok: bool,
    pub reason: String,
    /// The user the PING authenticated as (when users were asked for).
    pub user: Option<String>,
}

fn random_hex() -> String {
    let mut b = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut b);
    hex::encode(b)
}

/// `hex(sha512(parts...))`.
pub fn digest(parts: &[&[u8]]) -> String {
    let mut h = Sha512::new();
    for p in parts {
        h.update(p);
    }
    hex::encode(h.finalize())
}

impl Handshake {
    /// Fresh nonce and user-auth salt (ASCII, so senders that read them as text or as
    /// bytes hash the same thing).
    pub fn new() -> Handshake {
        Handshake {
            nonce: random_hex(),
            auth_salt: random_hex(),
        }
    }

    /// The HELO message. `auth` is empty when no users are configured, which tells the
    /// client that no username/password is needed.
    pub fn helo(&self, users_required: bool) -> Vec<u8> {
        let mut out = Vec::with_capacity(96);
        out.push(0x92);
        put_str(&mut out, "HELO");
        out.push(0x83);
        put_str(&mut out, "nonce");
        put_str(&mut out, &self.nonce);
        put_str(&mut out, "auth");
        put_str(&mut out, if users_required { &self.auth_salt } else { "" });
        put_str(&mut out, "keepalive");
        out.push(0xc3);
        out
    }

    /// Checks a PING and builds the PONG.
    pub fn pong(&self, ping: &Ping, shared_key: &str, self_hostname: &str, users: &Users) -> Pong {
        let expected = digest(&[
            &ping.salt,
            &ping.hostname,
            self.nonce.as_bytes(),
            shared_key.as_bytes(),
        ]);
        let mut reason = String::new();
        let mut user = None;
        if !eq_ignore_case(&ping.digest, expected.as_bytes()) {
            reason = "shared_key mismatch".to_string();
        } else if users.required {
            // The digest is computed for unknown users too: the answer takes as long
            // whether the user exists or not.
            let password = users.password(&ping.username);
            let expected = digest(&[
                self.auth_salt.as_bytes(),
                &ping.username,
                password.as_deref().unwrap_or_default().as_bytes(),
            ]);
            let ok =
                eq_ignore_case(&ping.password_digest, expected.as_bytes()) && password.is_some();
            if ok {
                user = Some(String::from_utf8_lossy(&ping.username).into_owned());
            } else {
                reason = "username/password mismatch".to_string();
            }
        }
        let ok = reason.is_empty();
        let mut out = Vec::with_capacity(200);
        out.push(0x95);
        put_str(&mut out, "PONG");
        out.push(if ok { 0xc3 } else { 0xc2 });
        put_str(&mut out, &reason);
        put_str(&mut out, self_hostname);
        if ok {
            put_str(
                &mut out,
                &digest(&[
                    &ping.salt,
                    self_hostname.as_bytes(),
                    self.nonce.as_bytes(),
                    shared_key.as_bytes(),
                ]),
            );
        } else {
            put_str(&mut out, "");
        }
        Pong {
            bytes: out,
            ok,
            reason,
            user,
        }
    }
}

impl Default for Handshake {
    fn default() -> Self {
        Handshake::new()
    }
}

/// Constant-time-ish comparison of hex digests (case-insensitive: senders differ).
fn eq_ignore_case(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).fold(0u8, |acc, (x, y)| {
            acc | (x.to_ascii_lowercase() ^ y.to_ascii_lowercase())
        }) == 0
}

/// A MessagePack str.
pub fn put_str(out: &mut Vec<u8>, s: &str) {
    let n = s.len();
    if n < 32 {
        out.push(0xa0 | n as u8);
    } else if n < 256 {
        out.extend_from_slice(&[0xd9, n as u8]);
    } else if n < 65536 {
        out.push(0xda);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
    out.extend_from_slice(s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn ping(h: &Handshake, key: &str, user: &str, pw: &str) -> Ping {
        Ping {
            hostname: Bytes::from_static(b"client"),
            salt: Bytes::from_static(b"salty"),
            digest: Bytes::from(digest(&[
                b"salty",
                b"client",
                h.nonce.as_bytes(),
                key.as_bytes(),
            ])),
            username: Bytes::from(user.to_string()),
            password_digest: Bytes::from(digest(&[
                h.auth_salt.as_bytes(),
                user.as_bytes(),
                pw.as_bytes(),
            ])),
        }
    }

    #[test]
    fn right_key_passes_and_wrong_key_or_user_fails() {
        let h = Handshake::new();
        let config = vec![User {
            username: "alice".into(),
            password: "pw".into(),
        }];
        let none = Users {
            required: false,
            config: &[],
            store: None,
        };
        let users = Users {
            required: true,
            config: &config,
            store: None,
        };
        let anonymous = h.pong(&ping(&h, "k", "", ""), "k", "srv", &none);
        assert!(anonymous.ok);
        assert_eq!(anonymous.user, None);
        assert!(!h.pong(&ping(&h, "bad", "", ""), "k", "srv", &none).ok);
        let alice = h.pong(&ping(&h, "k", "alice", "pw"), "k", "srv", &users);
        assert!(alice.ok);
        assert_eq!(alice.user.as_deref(), Some("alice"));
        let bad = h.pong(&ping(&h, "k", "alice", "nope"), "k", "srv", &users);
        assert!(!bad.ok);
        let unknown = h.pong(&ping(&h, "k", "bob", "pw"), "k", "srv", &users);
        assert_eq!(unknown.reason, "username/password mismatch");
        // No shared key configured: it takes part as the empty string.
        assert!(h.pong(&ping(&h, "", "alice", "pw"), "", "srv", &users).ok);
        assert_eq!(bad.reason, "username/password mismatch");
        let v = rmpv::decode::read_value(&mut &bad.bytes[..]).unwrap();
        assert_eq!(v[0].as_str(), Some("PONG"));
        assert_eq!(v[1].as_bool(), Some(false));
    }
}
