//! ShareFetch and ShareAcknowledge v2 (Kafka 4.2+, KIP-1206/KIP-1222) over kafka-protocol
//! 0.18, which has v1 only. v2 differs from v1 by a few fixed-size fields, so a v2 request
//! is turned into the v1 one by cutting them out (their values returned), and a v2
//! answer is the v1 one (ShareFetch) or the v1 one with `AcquisitionLockTimeoutMs`
//! spliced in after `ErrorMessage` (ShareAcknowledge).
//!
//! - ShareFetch v2 request: v1 + `ShareAcquireMode` (int8) and `IsRenewAck` (bool) after
//!   `BatchSize`. Response: as v1.
//! - ShareAcknowledge v2 request: v1 + `IsRenewAck` (bool) after `ShareSessionEpoch`.
//!   Response: v1 + `AcquisitionLockTimeoutMs` (int32) after `ErrorMessage`.

use bytes::{Bytes, BytesMut};

/// What v2 added to a request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct V2Fields {
    /// 0: batch-optimized (MaxRecords is rounded up to a whole batch), 1: record limit.
    pub acquire_mode: i8,
    /// The request only renews acquisition locks (RENEW acknowledgements): nothing new
    /// is acquired.
    pub renew: bool,
}

/// The end of an unsigned varint starting at `pos`, and its value.
fn varint(b: &[u8], mut pos: usize) -> Option<(usize, u64)> {
    let mut value = 0u64;
    for shift in (0..35).step_by(7) {
        let byte = *b.get(pos)?;
        pos += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some((pos, value));
        }
    }
    None
}

/// The end of a compact nullable string starting at `pos`.
fn skip_compact_string(b: &[u8], pos: usize) -> Option<usize> {
    let (pos, n) = varint(b, pos)?;
    let len = usize::try_from(n.saturating_sub(1)).ok()?;
    let end = pos.checked_add(len)?;
    (end <= b.len()).then_some(end)
}

/// `body` without the `cut` bytes at `at`.
fn without(body: &Bytes, at: usize, cut: usize) -> Option<Bytes> {
    let rest = body.get(at + cut..)?;
    let mut out = BytesMut::with_capacity(body.len() - cut);
    out.extend_from_slice(body.get(..at)?);
    out.extend_from_slice(rest);
    Some(out.freeze())
}

/// A ShareFetch v2 body as v1, and the v2 fields; `None` if it is too short.
pub(crate) fn fetch_request_to_v1(body: &Bytes) -> Option<(Bytes, V2Fields)> {
    let pos = skip_compact_string(body, 0)?; // GroupId
    let pos = skip_compact_string(body, pos)?; // MemberId
                                               // ShareSessionEpoch, MaxWaitMs, MinBytes, MaxBytes, MaxRecords, BatchSize.
    let at = pos + 6 * 4;
    let fields = V2Fields {
        acquire_mode: *body.get(at)? as i8,
        renew: *body.get(at + 1)? != 0,
    };
    Some((without(body, at, 2)?, fields))
}

/// A ShareAcknowledge v2 body as v1, and its `IsRenewAck`; `None` if it is too short.
pub(crate) fn ack_request_to_v1(body: &Bytes) -> Option<(Bytes, bool)> {
    let pos = skip_compact_string(body, 0)?; // GroupId
    let pos = skip_compact_string(body, pos)?; // MemberId
    let at = pos + 4; // ShareSessionEpoch
    let renew = *body.get(at)? != 0;
    Some((without(body, at, 1)?, renew))
}

/// A ShareAcknowledge v1 response body as v2: `lock_ms` inserted after `ErrorMessage`.
pub(crate) fn ack_response_to_v2(body: &Bytes, lock_ms: i32) -> Option<Bytes> {
    let at = skip_compact_string(body, 4 + 2)?; // ThrottleTimeMs, ErrorCode, ErrorMessage
    let mut out = BytesMut::with_capacity(body.len() + 4);
    out.extend_from_slice(body.get(..at)?);
    out.extend_from_slice(&lock_ms.to_be_bytes());
    out.extend_from_slice(body.get(at..)?);
    Some(out.freeze())
}

/// The v2 body of a v1 ShareFetch request (what a v2 client sends): for tests.
#[cfg(test)]
pub(crate) fn fetch_request_to_v2(v1: &Bytes, fields: V2Fields) -> Bytes {
    let pos = skip_compact_string(v1, 0).unwrap();
    let at = skip_compact_string(v1, pos).unwrap() + 24;
    let mut out = BytesMut::new();
    out.extend_from_slice(&v1[..at]);
    out.extend_from_slice(&[fields.acquire_mode as u8, u8::from(fields.renew)]);
    out.extend_from_slice(&v1[at..]);
    out.freeze()
}

/// The v2 body of a v1 ShareAcknowledge request: for tests.
#[cfg(test)]
pub(crate) fn ack_request_to_v2(v1: &Bytes, renew: bool) -> Bytes {
    let pos = skip_compact_string(v1, 0).unwrap();
    let at = skip_compact_string(v1, pos).unwrap() + 4;
    let mut out = BytesMut::new();
    out.extend_from_slice(&v1[..at]);
    out.extend_from_slice(&[u8::from(renew)]);
    out.extend_from_slice(&v1[at..]);
    out.freeze()
}

/// The v1 body of a v2 ShareAcknowledge response: for tests.
#[cfg(test)]
pub(crate) fn ack_response_to_v1(v2: &Bytes) -> (Bytes, i32) {
    let at = skip_compact_string(v2, 6).unwrap();
    let lock = i32::from_be_bytes(v2[at..at + 4].try_into().unwrap());
    (without(v2, at, 4).unwrap(), lock)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{
        GroupId, ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest,
    };
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

    fn enc<T: Encodable>(m: &T) -> Bytes {
        let mut b = BytesMut::new();
        m.encode(&mut b, 1).unwrap();
        b.freeze()
    }

    #[test]
    fn v2_requests_round_trip_through_v1() {
        let fetch = ShareFetchRequest::default()
            .with_group_id(Some(GroupId(StrBytes::from_static_str("group"))))
            .with_member_id(Some(StrBytes::from_static_str("member")))
            .with_share_session_epoch(3)
            .with_max_records(7);
        let v1 = enc(&fetch);
        let fields = V2Fields {
            acquire_mode: 1,
            renew: true,
        };
        let v2 = fetch_request_to_v2(&v1, fields);
        assert_eq!(v2.len(), v1.len() + 2);
        assert_eq!(fetch_request_to_v1(&v2), Some((v1.clone(), fields)));
        let ack = ShareAcknowledgeRequest::default()
            .with_member_id(Some(StrBytes::from_static_str("m")))
            .with_share_session_epoch(9);
        let v1 = enc(&ack);
        let v2 = ack_request_to_v2(&v1, true);
        let (back, renew) = ack_request_to_v1(&v2).unwrap();
        assert!(renew);
        let mut b = back.clone();
        assert_eq!(ShareAcknowledgeRequest::decode(&mut b, 1).unwrap(), ack);
        assert!(fetch_request_to_v1(&Bytes::from_static(&[5, b'a'])).is_none());
    }

    #[test]
    fn the_ack_response_gets_the_lock_duration() {
        let r = ShareAcknowledgeResponse::default()
            .with_error_message(Some(StrBytes::from_static_str("oops")));
        let v1 = enc(&r);
        let v2 = ack_response_to_v2(&v1, 30_000).unwrap();
        assert_eq!(ack_response_to_v1(&v2), (v1, 30_000));
    }
}
