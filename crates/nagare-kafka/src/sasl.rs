//! The SASL exchange of one Kafka connection (SaslHandshake v1 then SaslAuthenticate),
//! for PLAIN and SCRAM-SHA-256/512, checked against the broker's user store.
//!
//! The stage lives in the connection's [`Session`](crate::session::Session); the two
//! handlers move it along. A failed login answers SASL_AUTHENTICATION_FAILED (without
//! saying whether the user exists) after the login throttle's delay, then the connection
//! closes, as Kafka does.

use nagare_core::security::scram::{ScramError, ScramMechanism, ServerExchange};
use nagare_core::security::users::{validate_name, MAX_PASSWORD_LEN};

/// Mechanisms offered, in SaslHandshake's answer.
pub(crate) const MECHANISMS: [&str; 3] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

/// Largest SASL token accepted (a PLAIN token is two names and a password; SCRAM messages
/// are a few hundred bytes).
pub(crate) const MAX_TOKEN: usize = 8 * 1024;

/// Where a connection's SASL exchange is.
#[derive(Default)]
pub(crate) enum SaslStage {
    /// Nothing yet: a handshake may choose a mechanism.
    #[default]
    Start,
    /// PLAIN chosen: one token expected.
    Plain,
    /// SCRAM chosen, client-first expected.
    ScramFirst(Box<ServerExchange>),
    /// Server-first sent, client-final expected.
    ScramFinal(Box<ServerExchange>),
    /// Authenticated, or failed: no more SASL on this connection.
    Over,
}

impl SaslStage {
    /// The stage after a handshake asking for `mechanism`, if it is one we offer.
    pub(crate) fn chosen(mechanism: &str) -> Option<SaslStage> {
        match mechanism {
            "PLAIN" => Some(SaslStage::Plain),
            m => ScramMechanism::from_sasl_name(m)
                .map(|m| SaslStage::ScramFirst(Box::new(ServerExchange::new(m)))),
        }
    }
}

/// A PLAIN token: `authzid NUL authcid NUL password` (RFC 4616).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct PlainToken<'a> {
    pub user: &'a str,
    pub password: &'a str,
}

/// Parses a PLAIN token; `None` for anything malformed (a refusal like a wrong password).
pub(crate) fn parse_plain(token: &[u8]) -> Option<PlainToken<'_>> {
    if token.len() > MAX_TOKEN {
        return None;
    }
    let text = std::str::from_utf8(token).ok()?;
    let mut parts = text.split('\0');
    let (authzid, user, password) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || user.is_empty() || password.len() > MAX_PASSWORD_LEN {
        return None;
    }
    // Acting as someone else is not supported: the authorization id must be empty or
    // the user itself (Kafka's PlainServer does the same).
    if !authzid.is_empty() && authzid != user {
        return None;
    }
    validate_name(user).ok()?;
    Some(PlainToken { user, password })
}

/// The user a SCRAM failure concerns, for the log line.
pub(crate) fn scram_user(e: &ScramError, exchange: Option<&ServerExchange>) -> String {
    match e {
        ScramError::Failed { user } => user.clone(),
        ScramError::Malformed(_) => exchange
            .and_then(|x| x.user())
            .unwrap_or_default()
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_tokens() {
        assert_eq!(
            parse_plain(b"\0alice\0pw"),
            Some(PlainToken {
                user: "alice",
                password: "pw"
            })
        );
        assert!(parse_plain(b"alice\0alice\0pw").is_some());
        assert!(parse_plain(b"bob\0alice\0pw").is_none());
        assert!(parse_plain(b"\0alice").is_none());
        assert!(parse_plain(b"\0\0pw").is_none());
        assert!(parse_plain(b"\0a\0b\0c").is_none());
        assert!(parse_plain(&[0xff, 0, b'a', 0, b'b']).is_none());
        assert!(parse_plain(&vec![b'a'; MAX_TOKEN + 1]).is_none());
    }

    #[test]
    fn random_tokens_never_panic() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for round in 0..5_000u32 {
            let len = (round % 200) as usize;
            let mut token = Vec::with_capacity(len);
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Mostly printable, with separators, so the parsers get past the first checks.
                let b = x as u8;
                token.push(match b % 8 {
                    0 => 0,
                    1 => b',',
                    2 => b'=',
                    _ => b'a' + b % 26,
                });
            }
            // The fuzz target's entry: PLAIN, then both SCRAM mechanisms' messages.
            crate::fuzzing::sasl_exchange(&token);
        }
    }
}
