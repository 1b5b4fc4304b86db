//! The fuzz target's entry point (built for tests and with the `fuzzing` feature only):
//! arbitrary bytes go through framing, routing, the allocation guard and the crate's body
//! decoders, as a connection would take them, without running any handler.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::RequestKind;

use crate::codec::{self, ParsedRequest};
use crate::handlers;

/// Largest frame taken from fuzz input (the server's limit comes from its config).
const MAX_FRAME: usize = 1 << 20;

/// Feeds `data` through the request path as a stream of frames, then once more as a
/// single frame body so that short inputs reach the decoders too. Never panics.
pub fn decode_all(data: &[u8]) {
    let mut buf = BytesMut::from(data);
    while let Ok(Some(frame)) = codec::next_frame(&mut buf, MAX_FRAME) {
        decode_frame(frame);
    }
    decode_frame(Bytes::copy_from_slice(data));
}

fn decode_frame(frame: Bytes) {
    if let Ok((_, req)) = handlers::route(frame) {
        let _ = decode_body(&req);
    }
}

/// Feeds `data` through the SASL exchange's decoders: as a PLAIN token, and as SCRAM
/// client-first then client-final messages (split at the first newline; once as given
/// and once behind a valid client-first head so the later parsers are reached). The
/// user store is empty, so SCRAM runs its fake exchange for unknown users, which parses
/// exactly what a real one does. Never panics.
pub fn sasl_exchange(data: &[u8]) {
    use nagare_core::security::scram::{ScramMechanism, ServerExchange};
    use nagare_core::security::UserStore;
    static USERS: std::sync::OnceLock<UserStore> = std::sync::OnceLock::new();
    let users = USERS.get_or_init(UserStore::in_memory);
    let _ = crate::sasl::parse_plain(data);
    let (first, last) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &data[..0]),
    };
    let mut prefixed = b"n,,n=user,r=".to_vec();
    prefixed.extend_from_slice(first);
    for mechanism in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
        for head in [first, &prefixed[..]] {
            let mut exchange = ServerExchange::new(mechanism);
            if exchange.client_first(head, users).is_ok() {
                let _ = exchange.client_final(last);
            }
        }
    }
}

/// Decodes any request body we implement, after the guard has walked it, and drops it.
fn decode_body(req: &ParsedRequest) -> Result<(), String> {
    nagare_kafka_guard::check_request(req.api_key, req.version, &req.body)
        .map_err(|e| e.to_string())?;
    let mut body = req.body.clone();
    RequestKind::decode(req.api_key, &mut body, req.version)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_input_never_panics() {
        // A cheap stand-in for the fuzz target in `cargo test`: xorshift noise with valid
        // frame sizes and API keys so the guard and decoders are reached.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for round in 0..20_000u32 {
            let mut data = Vec::new();
            let len = (round % 120) as usize;
            let mut frame = Vec::new();
            frame.extend_from_slice(&((round % 70) as i16).to_be_bytes());
            frame.extend_from_slice(&((round / 70 % 14) as i16).to_be_bytes());
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                frame.push(x as u8);
            }
            data.extend_from_slice(&(frame.len() as i32).to_be_bytes());
            data.extend_from_slice(&frame);
            decode_all(&data);
        }
    }
}
