//! The client side of SCRAM-SHA-256/512 (RFC 5802, RFC 7677) as Kafka runs it inside
//! SaslAuthenticate: client-first, server-first, client-final, server-final, with the
//! server's signature checked so a broker that does not know the password is refused.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

use crate::ShareError;

/// Iteration counts accepted from a server: Kafka's own bounds. A larger count would let
/// a broker make the client spin on PBKDF2.
const MIN_ITERATIONS: u32 = 4096;
const MAX_ITERATIONS: u32 = 16384;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScramHash {
    Sha256,
    Sha512,
}

impl ScramHash {
    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        // Both HMACs take keys of any length: `new_from_slice` cannot fail here.
        match self {
            ScramHash::Sha256 => match Hmac::<Sha256>::new_from_slice(key) {
                Ok(mut m) => {
                    m.update(data);
                    m.finalize().into_bytes().to_vec()
                }
                Err(_) => Vec::new(),
            },
            ScramHash::Sha512 => match Hmac::<Sha512>::new_from_slice(key) {
                Ok(mut m) => {
                    m.update(data);
                    m.finalize().into_bytes().to_vec()
                }
                Err(_) => Vec::new(),
            },
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => Sha256::digest(data).to_vec(),
            ScramHash::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// Hi() of RFC 5802: PBKDF2 with this hash's HMAC.
    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => {
                let mut out = [0u8; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out.to_vec()
            }
            ScramHash::Sha512 => {
                let mut out = [0u8; 64];
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out);
                out.to_vec()
            }
        }
    }
}

/// One SCRAM exchange, from the client's side.
pub(crate) struct ScramClient {
    hash: ScramHash,
    password: String,
    nonce: String,
    first_bare: String,
    /// What the server must prove in its final message, once client-final is built.
    server_signature: Option<Vec<u8>>,
}

fn refused(why: &str) -> ShareError {
    ShareError::Protocol(format!("SCRAM: {why}"))
}

impl ScramClient {
    pub(crate) fn new(hash: ScramHash, user: &str, password: &str, nonce: &str) -> ScramClient {
        // RFC 5802 5.1: ',' and '=' in a user name are escaped.
        let user = user.replace('=', "=3D").replace(',', "=2C");
        ScramClient {
            hash,
            password: password.to_string(),
            nonce: nonce.to_string(),
            first_bare: format!("n={user},r={nonce}"),
            server_signature: None,
        }
    }

    /// `n,,n=user,r=nonce`: no channel binding, no authorization id.
    pub(crate) fn client_first(&self) -> Vec<u8> {
        format!("n,,{}", self.first_bare).into_bytes()
    }

    /// The client-final message answering `server_first`.
    pub(crate) fn client_final(&mut self, server_first: &[u8]) -> Result<Vec<u8>, ShareError> {
        let text =
            std::str::from_utf8(server_first).map_err(|_| refused("server-first is not UTF-8"))?;
        let (mut nonce, mut salt, mut iterations) = (None, None, None);
        for attr in text.split(',') {
            match attr.split_once('=') {
                Some(("r", v)) => nonce = Some(v),
                Some(("s", v)) => salt = Some(B64.decode(v).map_err(|_| refused("bad salt"))?),
                Some(("i", v)) => iterations = v.parse::<u32>().ok(),
                Some(("m", _)) => return Err(refused("mandatory extension not supported")),
                _ => {}
            }
        }
        let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
            return Err(refused("server-first lacks nonce, salt or iterations"));
        };
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(refused("server nonce does not extend ours"));
        }
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return Err(refused("iteration count out of range"));
        }
        let h = self.hash;
        let salted = h.salted_password(self.password.as_bytes(), &salt, iterations);
        let client_key = h.hmac(&salted, b"Client Key");
        let stored_key = h.hash(&client_key);
        // "biws" is base64("n,,"): the GS2 header of client-first.
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.first_bare);
        let signature = h.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let server_key = h.hmac(&salted, b"Server Key");
        self.server_signature = Some(h.hmac(&server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    /// Checks the server-final message: the server's signature, or its error.
    pub(crate) fn verify_server_final(&self, server_final: &[u8]) -> Result<(), ShareError> {
        let text =
            std::str::from_utf8(server_final).map_err(|_| refused("server-final is not UTF-8"))?;
        if let Some(e) = text.strip_prefix("e=") {
            return Err(refused(&format!("server error {e}")));
        }
        let expected = self
            .server_signature
            .as_ref()
            .ok_or_else(|| refused("server-final before client-final"))?;
        let got = text
            .split(',')
            .find_map(|a| a.strip_prefix("v="))
            .and_then(|v| B64.decode(v).ok())
            .ok_or_else(|| refused("server-final without a signature"))?;
        if bool::from(got.ct_eq(expected)) {
            Ok(())
        } else {
            Err(refused(
                "the server's signature does not match: it does not know the password",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nagare_core::security::scram::{ScramMechanism, ServerExchange};
    use nagare_core::security::UserStore;

    /// RFC 7677's SCRAM-SHA-256 example, byte for byte (4096 iterations).
    #[test]
    fn rfc7677_example() {
        let mut c = ScramClient::new(ScramHash::Sha256, "user", "pencil", "rOprNGfwEbeRWgbNEkqO");
        assert_eq!(c.client_first(), b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let fin = c.client_final(server_first).unwrap();
        assert_eq!(
            String::from_utf8(fin).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        c.verify_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap();
        assert!(c.verify_server_final(b"v=AAAA").is_err());
        assert!(c.verify_server_final(b"e=invalid-proof").is_err());
    }

    /// Against nagare's own SCRAM server, both hashes, right and wrong passwords.
    #[tokio::test]
    async fn against_nagares_server() {
        let users = UserStore::in_memory();
        users.add("alice", "s3cret-pass", false).await.unwrap();
        for (hash, mech) in [
            (ScramHash::Sha256, ScramMechanism::Sha256),
            (ScramHash::Sha512, ScramMechanism::Sha512),
        ] {
            for (password, ok) in [("s3cret-pass", true), ("wrong-pass", false)] {
                let mut server = ServerExchange::new(mech);
                let mut client = ScramClient::new(hash, "alice", password, "nonce123");
                let first = server.client_first(&client.client_first(), &users).unwrap();
                let fin = client.client_final(&first).unwrap();
                match server.client_final(&fin) {
                    Ok((server_final, _)) => {
                        assert!(ok);
                        client.verify_server_final(&server_final).unwrap();
                    }
                    Err(_) => assert!(!ok),
                }
            }
        }
    }

    #[test]
    fn hostile_server_first_is_refused() {
        let mut c = ScramClient::new(ScramHash::Sha256, "u", "p", "abc");
        for bad in [
            &b"r=xyz,s=AAAA,i=4096"[..],
            b"r=abc,s=AAAA,i=4096",
            b"r=abcd,s=AAAA,i=100000000",
            b"r=abcd,s=AAAA",
            b"r=abcd,s=AAAA,i=4096,m=ext",
            b"\xff",
        ] {
            assert!(c.client_final(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            ScramClient::new(ScramHash::Sha256, "a=b,c", "p", "n").client_first(),
            b"n,,n=a=3Db=2Cc,r=n"
        );
    }
}
