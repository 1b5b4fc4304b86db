//! SCRAM (RFC 5802, RFC 7677) on the server side: credentials and the two-message
//! exchange Kafka's SaslAuthenticate carries.
//!
//! As Kafka's `ScramSaslServer`: no channel binding (a `p=` GS2 header is refused), an
//! authorization id must equal the user name, the `tokenauth` extension (delegation
//! tokens) is refused and other extensions are ignored. A failed proof is an error the
//! broker answers with `SASL_AUTHENTICATION_FAILED`, not an `e=` server-final message.
//! An unknown user gets a made-up but plausible server-first message (stable salt, usual
//! iteration count), so the exchange only fails at the end, as for a wrong password.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::{Deserialize, Serialize};

use super::crypto;
use super::users::UserStore;

/// Longest client message accepted (a user name, a nonce, a proof and some slack).
pub const MAX_CLIENT_MESSAGE: usize = 4096;
/// Random bytes of the server's nonce part (base64: 32 characters).
const SERVER_NONCE_BYTES: usize = 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ScramMechanism {
    #[serde(rename = "SCRAM-SHA-256")]
    Sha256,
    #[serde(rename = "SCRAM-SHA-512")]
    Sha512,
}

impl ScramMechanism {
    /// `SCRAM-SHA-256` / `SCRAM-SHA-512`.
    pub fn sasl_name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_sasl_name(name: &str) -> Option<ScramMechanism> {
        match name {
            "SCRAM-SHA-256" => Some(ScramMechanism::Sha256),
            "SCRAM-SHA-512" => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    /// Kafka's mechanism number (DescribeUserScramCredentials): 1 = SHA-256, 2 = SHA-512.
    pub fn kafka_type(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    pub fn from_kafka_type(t: i8) -> Option<ScramMechanism> {
        match t {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    /// Bytes of one hash (and of a salted password, a key, a proof).
    pub fn hash_len(self) -> usize {
        match self {
            ScramMechanism::Sha256 => 32,
            ScramMechanism::Sha512 => 64,
        }
    }
}

/// What the server keeps of a SCRAM password.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredential {
    #[serde(with = "hex::serde")]
    pub salt: Vec<u8>,
    pub iterations: u32,
    #[serde(with = "hex::serde")]
    pub stored_key: Vec<u8>,
    #[serde(with = "hex::serde")]
    pub server_key: Vec<u8>,
}

impl ScramCredential {
    /// A credential for `password` with a fresh random salt. CPU-heavy (PBKDF2).
    pub fn from_password(
        mechanism: ScramMechanism,
        password: &str,
        iterations: u32,
    ) -> ScramCredential {
        let salt = crypto::random_bytes(32);
        let salted = crypto::pbkdf2(mechanism, password.as_bytes(), &salt, iterations);
        ScramCredential::from_salted_password(mechanism, &salted, &salt, iterations)
    }

    /// The credential of `SaltedPassword = Hi(password, salt, iterations)` (what Kafka's
    /// AlterUserScramCredentials sends): `StoredKey = H(HMAC(SaltedPassword, "Client
    /// Key"))`, `ServerKey = HMAC(SaltedPassword, "Server Key")`.
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salted_password: &[u8],
        salt: &[u8],
        iterations: u32,
    ) -> ScramCredential {
        let client_key = crypto::hmac(mechanism, salted_password, b"Client Key");
        ScramCredential {
            salt: salt.to_vec(),
            iterations,
            stored_key: crypto::hash(mechanism, &client_key),
            server_key: crypto::hmac(mechanism, salted_password, b"Server Key"),
        }
    }
}

/// Why an exchange failed; the message is safe to show the client.
#[derive(Debug, thiserror::Error)]
pub enum ScramError {
    #[error("malformed SCRAM message: {0}")]
    Malformed(&'static str),
    #[error("authentication failed")]
    Failed { user: String },
}

/// Where an exchange is.
enum Step {
    /// Waiting for the client-first message.
    Start,
    /// Server-first sent; waiting for the client-final message.
    Sent(Box<Pending>),
    /// Over (successfully or not): every further message is refused.
    Over,
}

struct Pending {
    user: String,
    /// The GS2 header as the client sent it (what `c=` must carry back).
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
    credential: ScramCredential,
    /// False when `credential` is made up (unknown user): the proof then never passes.
    known: bool,
}

/// One server-side SCRAM exchange: client-first → server-first → client-final →
/// server-final.
pub struct ServerExchange {
    mechanism: ScramMechanism,
    step: Step,
    /// The server's nonce part, fixed in tests to replay published exchanges.
    server_nonce: Option<String>,
    user: Option<String>,
}

impl ServerExchange {
    pub fn new(mechanism: ScramMechanism) -> ServerExchange {
        ServerExchange {
            mechanism,
            step: Step::Start,
            server_nonce: None,
            user: None,
        }
    }

    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    /// The user the client named in its first message (for logging a failure).
    pub fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    /// Takes the client-first message, answers the server-first one.
    pub fn client_first(&mut self, msg: &[u8], users: &UserStore) -> Result<Vec<u8>, ScramError> {
        if !matches!(self.step, Step::Start) {
            self.step = Step::Over;
            return Err(ScramError::Malformed("unexpected client-first message"));
        }
        self.step = Step::Over;
        let first = parse_client_first(msg)?;
        self.user = Some(first.user.clone());
        let (credential, known) = match users.scram(&first.user, self.mechanism) {
            Some(c) => (c, true),
            None => (users.fake_scram(&first.user, self.mechanism), false),
        };
        let server_part = self
            .server_nonce
            .take()
            .unwrap_or_else(|| B64.encode(crypto::random_bytes(SERVER_NONCE_BYTES)));
        let nonce = format!("{}{}", first.nonce, server_part);
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&credential.salt),
            credential.iterations
        );
        let reply = server_first.clone().into_bytes();
        self.step = Step::Sent(Box::new(Pending {
            user: first.user,
            gs2_header: first.gs2_header,
            client_first_bare: first.bare,
            server_first,
            nonce,
            credential,
            known,
        }));
        Ok(reply)
    }

    /// Takes the client-final message; on success answers the server-final message and
    /// the authenticated user name.
    pub fn client_final(&mut self, msg: &[u8]) -> Result<(Vec<u8>, String), ScramError> {
        let Step::Sent(p) = std::mem::replace(&mut self.step, Step::Over) else {
            return Err(ScramError::Malformed("unexpected client-final message"));
        };
        let m = self.mechanism;
        let text = bounded_utf8(msg)?;
        let proof_at = text.rfind(",p=").ok_or(ScramError::Malformed(
            "client-final message without a proof",
        ))?;
        let without_proof = &text[..proof_at];
        let proof = B64
            .decode(&text[proof_at + 3..])
            .map_err(|_| ScramError::Malformed("proof is not base64"))?;
        let mut attrs = without_proof.split(',');
        let cbind =
            attrs
                .next()
                .and_then(|a| a.strip_prefix("c="))
                .ok_or(ScramError::Malformed(
                    "client-final message must start with c=",
                ))?;
        let cbind = B64
            .decode(cbind)
            .map_err(|_| ScramError::Malformed("channel binding is not base64"))?;
        if cbind != p.gs2_header.as_bytes() {
            return Err(ScramError::Malformed(
                "channel binding does not match the GS2 header",
            ));
        }
        let nonce =
            attrs
                .next()
                .and_then(|a| a.strip_prefix("r="))
                .ok_or(ScramError::Malformed(
                    "client-final message without a nonce",
                ))?;
        if nonce != p.nonce {
            return Err(ScramError::Malformed("nonce does not match"));
        }
        if proof.len() != m.hash_len() {
            return Err(ScramError::Failed { user: p.user });
        }
        let auth_message = format!(
            "{},{},{}",
            p.client_first_bare, p.server_first, without_proof
        );
        let client_signature = crypto::hmac(m, &p.credential.stored_key, auth_message.as_bytes());
        let client_key: Vec<u8> = proof
            .iter()
            .zip(&client_signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let matches = crypto::ct_eq(&crypto::hash(m, &client_key), &p.credential.stored_key);
        if !(matches && p.known) {
            return Err(ScramError::Failed { user: p.user });
        }
        let server_signature = crypto::hmac(m, &p.credential.server_key, auth_message.as_bytes());
        let reply = format!("v={}", B64.encode(server_signature)).into_bytes();
        Ok((reply, p.user))
    }

    #[cfg(test)]
    pub(crate) fn with_server_nonce(mechanism: ScramMechanism, nonce: &str) -> ServerExchange {
        let mut e = ServerExchange::new(mechanism);
        e.server_nonce = Some(nonce.to_string());
        e
    }
}

struct ClientFirst {
    gs2_header: String,
    bare: String,
    user: String,
    nonce: String,
}

fn bounded_utf8(msg: &[u8]) -> Result<&str, ScramError> {
    if msg.len() > MAX_CLIENT_MESSAGE {
        return Err(ScramError::Malformed("message too long"));
    }
    std::str::from_utf8(msg).map_err(|_| ScramError::Malformed("message is not UTF-8"))
}

/// `gs2-header client-first-message-bare`: `n,[a=authzid],n=user,r=nonce[,ext=...]`.
fn parse_client_first(msg: &[u8]) -> Result<ClientFirst, ScramError> {
    let text = bounded_utf8(msg)?;
    let (flag, rest) = text
        .split_once(',')
        .ok_or(ScramError::Malformed("missing GS2 header"))?;
    match flag {
        "n" | "y" => {}
        f if f.starts_with("p=") => {
            return Err(ScramError::Malformed("channel binding is not supported"))
        }
        _ => return Err(ScramError::Malformed("invalid GS2 channel binding flag")),
    }
    let (authzid, bare) = rest
        .split_once(',')
        .ok_or(ScramError::Malformed("missing GS2 header"))?;
    let authzid = match authzid {
        "" => None,
        a => Some(decode_saslname(
            a.strip_prefix("a=")
                .ok_or(ScramError::Malformed("invalid authorization id"))?,
        )?),
    };
    let gs2_header = text[..text.len() - bare.len()].to_string();
    let mut attrs = bare.split(',');
    let first = attrs
        .next()
        .ok_or(ScramError::Malformed("missing user name"))?;
    if first.starts_with("m=") {
        return Err(ScramError::Malformed(
            "mandatory extensions are not supported",
        ));
    }
    let user = decode_saslname(
        first
            .strip_prefix("n=")
            .ok_or(ScramError::Malformed("missing user name"))?,
    )?;
    if user.is_empty() {
        return Err(ScramError::Malformed("empty user name"));
    }
    let nonce = attrs
        .next()
        .and_then(|a| a.strip_prefix("r="))
        .ok_or(ScramError::Malformed("missing client nonce"))?;
    if nonce.is_empty() || !nonce.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Err(ScramError::Malformed("invalid client nonce"));
    }
    for ext in attrs {
        let (key, value) = ext
            .split_once('=')
            .ok_or(ScramError::Malformed("invalid extension"))?;
        if key == "tokenauth" && value.eq_ignore_ascii_case("true") {
            return Err(ScramError::Malformed(
                "delegation token authentication is not supported",
            ));
        }
    }
    if authzid.as_ref().is_some_and(|a| *a != user) {
        return Err(ScramError::Malformed(
            "an authorization id different from the user name is not supported",
        ));
    }
    Ok(ClientFirst {
        gs2_header,
        bare: bare.to_string(),
        nonce: nonce.to_string(),
        user,
    })
}

/// RFC 5802 `saslname`: `=2C` is `,`, `=3D` is `=`, any other `=` is an error.
fn decode_saslname(s: &str) -> Result<String, ScramError> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        let escape = rest.get(at..at + 3);
        match escape {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(ScramError::Malformed("invalid escape in user name")),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
#[path = "scram_tests.rs"]
mod tests;
