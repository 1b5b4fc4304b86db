//! Allocation guard for Kafka message bodies, both directions.
//!
//! The kafka-protocol crate decodes an array by reading its count from the wire and
//! calling `Vec::with_capacity(count)` before reading any element, so a tiny body that
//! claims 2^31 elements makes the process abort on a failed allocation. Every body is
//! therefore walked first: the Kafka front end checks each request with
//! [`check_request`] (and a JoinGroup's consumer subscription with
//! [`check_subscription`]), the share client and the Kafka crate's small client (`nagare
//! produce`, `consume`, `bench`) each response with [`check_response`].
//! A walker follows the crate's decoder field by field (the walkers in `generated.rs` are
//! produced from the crate's own decode bodies by `tools/gen_guard.py`, which
//! `tests/generated_is_current.rs` keeps honest) but keeps nothing and refuses an array
//! whose count exceeds the bytes left (every element takes at least one byte). A body that
//! passes can then be decoded by the crate with every allocation bounded by its size.

mod error;
mod generated;
mod types;

pub use error::GuardError;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;

/// Checks that a request body of `key` at `version` decodes without unbounded allocation.
pub fn check_request(key: ApiKey, version: i16, body: &Bytes) -> Result<(), GuardError> {
    let mut buf = body.clone();
    generated::check_request(key, &mut buf, version)
}

/// Checks that a response body of `key` at `version` decodes without unbounded
/// allocation; [`GuardError::NoResponseGuard`] for a response nagare never decodes.
pub fn check_response(key: ApiKey, version: i16, body: &Bytes) -> Result<(), GuardError> {
    let mut buf = body.clone();
    generated::check_response(key, &mut buf, version)
        .unwrap_or(Err(GuardError::NoResponseGuard(key)))
}

/// Checks a consumer-protocol subscription body (what follows its version prefix inside
/// JoinGroup's protocol metadata) the same way.
pub fn check_subscription(version: i16, body: &Bytes) -> Result<(), GuardError> {
    let mut buf = body.clone();
    generated::check_subscription(&mut buf, version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, BytesMut};
    use kafka_protocol::messages::{
        ConsumerProtocolSubscription, FetchResponse, ListOffsetsResponse, MetadataRequest,
        MetadataResponse, ProduceRequest, ProduceResponse, ShareFetchResponse,
    };
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn encoded<T: Encodable>(msg: &T, version: i16) -> Bytes {
        let mut b = BytesMut::new();
        msg.encode(&mut b, version).unwrap();
        b.freeze()
    }

    #[test]
    fn huge_request_array_counts_are_refused() {
        let mut b = BytesMut::new();
        b.put_i32(0x7fff_ffff);
        assert!(check_request(ApiKey::Metadata, 1, &b.freeze()).is_err());
        // Compact array (flexible version): varint count 2^32-1.
        let mut b = BytesMut::new();
        b.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert!(check_request(ApiKey::Metadata, 9, &b.freeze()).is_err());
    }

    #[test]
    fn valid_requests_pass_at_every_version() {
        for v in 0..=12 {
            let body = encoded(&MetadataRequest::default(), v);
            assert_eq!(
                check_request(ApiKey::Metadata, v, &body),
                Ok(()),
                "metadata v{v}"
            );
        }
        for v in 3..=11 {
            let body = encoded(&ProduceRequest::default(), v);
            assert_eq!(
                check_request(ApiKey::Produce, v, &body),
                Ok(()),
                "produce v{v}"
            );
        }
    }

    #[test]
    fn unsupported_request_versions_are_refused() {
        let body = encoded(&MetadataRequest::default(), 12);
        assert_eq!(
            check_request(ApiKey::Metadata, 99, &body),
            Err(GuardError::Malformed(
                "specified version not supported by this message type".into()
            ))
        );
    }

    #[test]
    fn huge_response_array_counts_are_refused() {
        // Metadata v12 (flexible): throttle, then the brokers' compact array count.
        let mut b = BytesMut::new();
        b.put_i32(0);
        b.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert!(check_response(ApiKey::Metadata, 12, &b.freeze()).is_err());
        // ShareFetch v1: throttle, error, message (null), lock timeout, responses count.
        let mut b = BytesMut::new();
        b.put_i32(0);
        b.put_i16(0);
        b.put_u8(0);
        b.put_i32(0);
        b.put_slice(&[0xfe, 0xff, 0xff, 0xff, 0x0f]);
        let refused = check_response(ApiKey::ShareFetch, 1, &b.freeze());
        assert!(
            matches!(&refused, Err(GuardError::Malformed(m)) if m.starts_with("array of")),
            "{refused:?}"
        );
    }

    #[test]
    fn valid_responses_pass() {
        let body = encoded(&MetadataResponse::default(), 12);
        assert_eq!(check_response(ApiKey::Metadata, 12, &body), Ok(()));
        let body = encoded(&ShareFetchResponse::default(), 1);
        assert_eq!(check_response(ApiKey::ShareFetch, 1, &body), Ok(()));
        // The versions nagare-kafka's client asks for.
        let body = encoded(&ProduceResponse::default(), 9);
        assert_eq!(check_response(ApiKey::Produce, 9, &body), Ok(()));
        let body = encoded(&FetchResponse::default(), 12);
        assert_eq!(check_response(ApiKey::Fetch, 12, &body), Ok(()));
        let body = encoded(&ListOffsetsResponse::default(), 7);
        assert_eq!(check_response(ApiKey::ListOffsets, 7, &body), Ok(()));
    }

    #[test]
    fn huge_fetch_response_counts_are_refused() {
        // Fetch v12: throttle, error, session id, then the responses' compact array count.
        let mut b = BytesMut::new();
        b.put_i32(0);
        b.put_i16(0);
        b.put_i32(0);
        b.put_slice(&[0xfe, 0xff, 0xff, 0xff, 0x0f]);
        assert!(check_response(ApiKey::Fetch, 12, &b.freeze()).is_err());
    }

    #[test]
    fn responses_never_decoded_have_no_guard() {
        let refused = check_response(ApiKey::JoinGroup, 9, &Bytes::new());
        assert_eq!(refused, Err(GuardError::NoResponseGuard(ApiKey::JoinGroup)));
        assert_eq!(
            refused.unwrap_err().to_string(),
            "no response guard for JoinGroup"
        );
    }

    #[test]
    fn subscriptions_are_walked() {
        let mut sub = ConsumerProtocolSubscription::default();
        sub.topics = vec![StrBytes::from_static_str("orders")];
        for v in 0..=3 {
            assert_eq!(check_subscription(v, &encoded(&sub, v)), Ok(()), "v{v}");
        }
        let mut b = BytesMut::new();
        b.put_i32(0x7fff_ffff);
        assert!(check_subscription(1, &b.freeze()).is_err());
    }

    #[test]
    fn truncated_bodies_are_refused() {
        let body = encoded(&MetadataResponse::default(), 12);
        for cut in 0..body.len() {
            assert!(
                check_response(ApiKey::Metadata, 12, &body.slice(..cut)).is_err(),
                "cut at {cut}"
            );
        }
    }
}
