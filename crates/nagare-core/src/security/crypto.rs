//! The few primitives the security code needs, per SCRAM mechanism: hash, HMAC, PBKDF2,
//! random bytes and a constant-time comparison (RustCrypto's `sha2`/`hmac`/`pbkdf2`/
//! `subtle`, the family the workspace already uses for hashing).

use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

use super::scram::ScramMechanism;

/// `H(data)`.
pub(crate) fn hash(mechanism: ScramMechanism, data: &[u8]) -> Vec<u8> {
    match mechanism {
        ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
        ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
    }
}

/// `HMAC(key, data)`.
pub(crate) fn hmac(mechanism: ScramMechanism, key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC takes keys of any length, so the constructors never fail; an empty answer
    // (which matches nothing) is the safe reading of a failure that cannot happen.
    match mechanism {
        ScramMechanism::Sha256 => match Hmac::<Sha256>::new_from_slice(key) {
            Ok(mut m) => {
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            Err(_) => Vec::new(),
        },
        ScramMechanism::Sha512 => match Hmac::<Sha512>::new_from_slice(key) {
            Ok(mut m) => {
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            Err(_) => Vec::new(),
        },
    }
}

/// PBKDF2 with HMAC-H, output as long as one hash (RFC 5802's `Hi`).
pub(crate) fn pbkdf2(
    mechanism: ScramMechanism,
    password: &[u8],
    salt: &[u8],
    iterations: u32,
) -> Vec<u8> {
    let mut out = vec![0u8; mechanism.hash_len()];
    match mechanism {
        ScramMechanism::Sha256 => {
            pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out)
        }
        ScramMechanism::Sha512 => {
            pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out)
        }
    }
    out
}

/// `n` bytes from the operating system's generator.
pub(crate) fn random_bytes(n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    rand::rngs::OsRng.fill_bytes(&mut b);
    b
}

/// Equality whose time does not depend on where the inputs differ.
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}
