//! Allocation guard for response bodies.
//!
//! The kafka-protocol crate decodes an array by reading its count from the wire and
//! calling `Vec::with_capacity(count)` before reading any element, so a short response
//! that claims 2^31 elements would make the process abort on a failed allocation. Every
//! response body is therefore walked first by [`check`], which follows the crate's
//! decoders field by field (the walkers in `generated.rs` are produced from the crate's own
//! decode bodies by `tools/gen_guard.py`) but allocates nothing and refuses an array whose
//! count exceeds the bytes left. A body that passes is then decoded by the crate with every
//! allocation bounded by the response's size, itself bounded by the connection.

mod generated;
pub(crate) mod types;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;

/// Checks that a response body of `key` at `version` decodes without unbounded allocation.
pub(crate) fn check(key: ApiKey, body: &Bytes, version: i16) -> Result<(), String> {
    let mut buf = body.clone();
    match generated::check_response(key, &mut buf, version) {
        Some(result) => result.map_err(|e| e.to_string()),
        None => Err(format!("no response guard for {key:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, BytesMut};
    use kafka_protocol::messages::{MetadataResponse, ShareFetchResponse};
    use kafka_protocol::protocol::Encodable;

    #[test]
    fn huge_array_counts_are_refused() {
        // Metadata v12 (flexible): throttle, then the brokers' compact array count.
        let mut b = BytesMut::new();
        b.put_i32(0);
        b.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert!(check(ApiKey::Metadata, &b.freeze(), 12).is_err());
        // ShareFetch v1: throttle, error, message (null), lock timeout, responses count.
        let mut b = BytesMut::new();
        b.put_i32(0);
        b.put_i16(0);
        b.put_u8(0);
        b.put_i32(0);
        b.put_slice(&[0xfe, 0xff, 0xff, 0xff, 0x0f]);
        assert!(check(ApiKey::ShareFetch, &b.freeze(), 1).is_err());
    }

    #[test]
    fn valid_responses_pass() {
        let mut b = BytesMut::new();
        MetadataResponse::default().encode(&mut b, 12).unwrap();
        assert_eq!(check(ApiKey::Metadata, &b.freeze(), 12), Ok(()));
        let mut b = BytesMut::new();
        ShareFetchResponse::default().encode(&mut b, 1).unwrap();
        assert_eq!(check(ApiKey::ShareFetch, &b.freeze(), 1), Ok(()));
    }

    #[test]
    fn keys_never_decoded_have_no_guard() {
        assert!(check(ApiKey::Produce, &Bytes::new(), 9).is_err());
    }
}
