//! Sans-io request framing: size-prefixed frames out of a byte buffer, and the request
//! header in front of each body. Every length read from the wire is bounded before
//! anything is allocated for it.

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::Decodable;

use crate::handlers;

/// Why a frame could not become a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("frame size {0} is negative")]
    NegativeSize(i32),
    #[error("request of {size} bytes exceeds the limit of {limit}")]
    TooLarge { size: usize, limit: usize },
    #[error("request too short for a header ({0} bytes)")]
    Truncated(usize),
    #[error("unknown or unsupported api key {key}")]
    UnknownApi { key: i16, correlation_id: i32 },
    #[error("unsupported version {version} of api key {key}")]
    UnsupportedVersion {
        key: i16,
        version: i16,
        correlation_id: i32,
    },
    #[error("malformed request header: {reason}")]
    BadHeader { correlation_id: i32, reason: String },
}

/// The size of the next frame, once its 4-byte prefix is in `buf`, checked against
/// `limit`. `Ok(None)` means more bytes are needed to know.
pub fn peek_frame_size(buf: &[u8], limit: usize) -> Result<Option<usize>, RequestError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let size = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if size < 0 {
        return Err(RequestError::NegativeSize(size));
    }
    let size = size as usize;
    if size > limit {
        return Err(RequestError::TooLarge { size, limit });
    }
    Ok(Some(size))
}

/// Takes the next complete frame (without its size prefix) off the front of `buf`.
pub fn next_frame(buf: &mut BytesMut, limit: usize) -> Result<Option<Bytes>, RequestError> {
    match peek_frame_size(buf, limit)? {
        Some(size) if buf.len() >= 4 + size => {
            buf.advance(4);
            Ok(Some(buf.split_to(size).freeze()))
        }
        _ => Ok(None),
    }
}

/// A request with its header decoded; the body is decoded by its handler.
#[derive(Debug, Clone)]
pub struct ParsedRequest {
    pub api_key: ApiKey,
    pub version: i16,
    pub header: RequestHeader,
    pub body: Bytes,
}

impl ParsedRequest {
    pub fn correlation_id(&self) -> i32 {
        self.header.correlation_id
    }
}

/// Decodes the header of one frame, after checking the API key and version against the
/// handler registry (an API we do not implement is refused before any decoding).
pub fn parse_request(mut frame: Bytes) -> Result<ParsedRequest, RequestError> {
    if frame.len() < 8 {
        return Err(RequestError::Truncated(frame.len()));
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let Some(handler) = handlers::find(key) else {
        return Err(RequestError::UnknownApi {
            key,
            correlation_id,
        });
    };
    if !handler.accepts(version) {
        return Err(RequestError::UnsupportedVersion {
            key,
            version,
            correlation_id,
        });
    }
    let header_version = handler.key.request_header_version(version);
    let header =
        RequestHeader::decode(&mut frame, header_version).map_err(|e| RequestError::BadHeader {
            correlation_id,
            reason: e.to_string(),
        })?;
    Ok(ParsedRequest {
        api_key: handler.key,
        version,
        header,
        body: frame,
    })
}

/// Feeds arbitrary bytes through framing, header parsing, the allocation guard and the
/// body decoders, as the connection would (the fuzz target's entry point).
pub fn decode_all_for_fuzzing(data: &[u8]) {
    let mut buf = BytesMut::from(data);
    while let Ok(Some(frame)) = next_frame(&mut buf, 1 << 20) {
        if let Ok(req) = parse_request(frame) {
            let _ = handlers::decode_any(&req);
        }
    }
    // The whole input as one frame body too, so short inputs reach the decoders.
    if let Ok(req) = parse_request(Bytes::copy_from_slice(data)) {
        let _ = handlers::decode_any(&req);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BufMut;

    #[test]
    fn frames_are_split_and_bounded() {
        let mut buf = BytesMut::new();
        buf.put_i32(3);
        buf.put_slice(b"abc");
        buf.put_i32(5);
        buf.put_slice(b"de");
        assert_eq!(
            next_frame(&mut buf, 100).unwrap().unwrap(),
            Bytes::from_static(b"abc")
        );
        assert_eq!(next_frame(&mut buf, 100).unwrap(), None);
        let mut big = BytesMut::new();
        big.put_i32(1000);
        assert!(matches!(
            next_frame(&mut big, 100),
            Err(RequestError::TooLarge { .. })
        ));
        let mut neg = BytesMut::new();
        neg.put_i32(-1);
        assert!(matches!(
            next_frame(&mut neg, 100),
            Err(RequestError::NegativeSize(-1))
        ));
    }

    #[test]
    fn unknown_api_and_version_are_refused() {
        let mut f = BytesMut::new();
        f.put_i16(9999);
        f.put_i16(0);
        f.put_i32(7);
        assert!(matches!(
            parse_request(f.freeze()),
            Err(RequestError::UnknownApi {
                key: 9999,
                correlation_id: 7
            })
        ));
        let mut f = BytesMut::new();
        f.put_i16(0);
        f.put_i16(1);
        f.put_i32(8);
        assert!(matches!(
            parse_request(f.freeze()),
            Err(RequestError::UnsupportedVersion { version: 1, .. })
        ));
        assert!(matches!(
            parse_request(Bytes::from_static(b"abc")),
            Err(RequestError::Truncated(3))
        ));
    }

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
            decode_all_for_fuzzing(&data);
        }
    }

    #[test]
    fn api_versions_header_parses() {
        let mut f = BytesMut::new();
        f.put_i16(18);
        f.put_i16(0);
        f.put_i32(42);
        f.put_i16(3);
        f.put_slice(b"cli");
        let r = parse_request(f.freeze()).unwrap();
        assert_eq!(r.correlation_id(), 42);
        assert_eq!(r.header.client_id.as_deref(), Some("cli"));
        assert!(r.body.is_empty());
    }
}
