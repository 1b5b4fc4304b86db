//! The fuzz target's entry point (built for tests and with the `fuzzing` feature only):
//! arbitrary bytes arrive as a client's TLS records at a server configured exactly as the
//! listeners are (a certificate made here once), before any front end sees a byte.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use rustls::ServerConfig;

use crate::tls::{config_for, parse_certs, parse_key, ClientAuth, TlsFiles};

fn config() -> Option<Arc<ServerConfig>> {
    static CONFIG: OnceLock<Option<Arc<ServerConfig>>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).ok()?;
            let here = Path::new("fuzz");
            let certs = parse_certs(made.cert.pem().as_bytes(), here).ok()?;
            let key = parse_key(made.key_pair.serialize_pem().as_bytes(), here).ok()?;
            let files = TlsFiles {
                cert: here.into(),
                key: here.into(),
                client_ca: None,
                client_auth: ClientAuth::None,
            };
            config_for(certs, key, &files).ok()
        })
        .clone()
}

/// Feeds `data` to a fresh server-side TLS session as what the client sent, and lets it
/// answer. Never panics.
pub fn tls_records(data: &[u8]) {
    let Some(config) = config() else {
        return;
    };
    let Ok(mut conn) = rustls::ServerConnection::new(config) else {
        return;
    };
    let mut input = data;
    while !input.is_empty() {
        match conn.read_tls(&mut input) {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                if conn.process_new_packets().is_err() {
                    break;
                }
            }
        }
    }
    let mut out = Vec::new();
    while conn.wants_write() {
        if conn.write_tls(&mut out).is_err() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn random_records_never_panic() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for round in 0..2_000u32 {
            // A plausible record header (handshake, TLS 1.0-1.3 versions) and noise.
            let mut data = vec![22, 3, (round % 4) as u8];
            let len = (round % 300) as u16;
            data.extend_from_slice(&len.to_be_bytes());
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                data.push(x as u8);
            }
            super::tls_records(&data);
        }
    }
}
