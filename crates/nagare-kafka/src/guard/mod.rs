//! Allocation guard for request bodies.
//!
//! The kafka-protocol crate decodes an array by reading its count from the wire and
//! calling `Vec::with_capacity(count)` before reading any element, so a tiny request that
//! claims 2^31 elements makes the process abort on a failed allocation. Every request body
//! is therefore walked first by [`check`], which follows the crate's decoders field by
//! field (the walkers in `generated.rs` are produced from the crate's own decode bodies by
//! `tools/gen_guard.py`) but allocates nothing and refuses an array whose count exceeds
//! the bytes left (every element takes at least one byte). A body that passes can then be
//! decoded by the crate with every allocation bounded by the request size.

mod generated;
pub(crate) mod types;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;

/// Checks that a request body of `key` at `version` decodes without unbounded allocation.
pub(crate) fn check(key: ApiKey, body: &Bytes, version: i16) -> Result<(), String> {
    let mut buf = body.clone();
    generated::check_request(key, &mut buf, version).map_err(|e| e.to_string())
}

/// Checks a consumer-protocol subscription body (what follows its version prefix inside
/// JoinGroup's protocol metadata) the same way.
pub(crate) fn check_subscription(body: &Bytes, version: i16) -> Result<(), String> {
    let mut buf = body.clone();
    generated::check_consumer_protocol_subscription_ConsumerProtocolSubscription(&mut buf, version)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, BytesMut};
    use kafka_protocol::messages::{MetadataRequest, ProduceRequest};
    use kafka_protocol::protocol::Encodable;

    #[test]
    fn huge_array_counts_are_refused() {
        let mut b = BytesMut::new();
        b.put_i32(0x7fff_ffff);
        assert!(check(ApiKey::Metadata, &b.freeze(), 1).is_err());
        // Compact array (flexible version): varint count 2^32-1.
        let mut b = BytesMut::new();
        b.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert!(check(ApiKey::Metadata, &b.freeze(), 9).is_err());
    }

    #[test]
    fn valid_requests_pass_at_every_version() {
        for v in 0..=12 {
            let mut b = BytesMut::new();
            MetadataRequest::default().encode(&mut b, v).unwrap();
            assert_eq!(
                check(ApiKey::Metadata, &b.freeze(), v),
                Ok(()),
                "metadata v{v}"
            );
        }
        for v in 3..=11 {
            let mut b = BytesMut::new();
            ProduceRequest::default().encode(&mut b, v).unwrap();
            assert_eq!(
                check(ApiKey::Produce, &b.freeze(), v),
                Ok(()),
                "produce v{v}"
            );
        }
    }
}
