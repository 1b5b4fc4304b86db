//! Sans-io request framing: size-prefixed frames out of a byte buffer, and the request
//! header in front of each body. Which API keys and versions are answered is the handler
//! table's business (`handlers::route`), not this module's. Every length read from the wire is bounded before
//! anything is allocated for it.

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::Decodable;

/// Why a frame could not become a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RequestError {
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
pub(crate) fn peek_frame_size(buf: &[u8], limit: usize) -> Result<Option<usize>, RequestError> {
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
pub(crate) fn next_frame(buf: &mut BytesMut, limit: usize) -> Result<Option<Bytes>, RequestError> {
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
pub(crate) struct ParsedRequest {
    pub api_key: ApiKey,
    pub version: i16,
    pub header: RequestHeader,
    pub body: Bytes,
    /// Another complete request came in the same read right behind this one: a Produce
    /// then lets the connection's following requests queue their batches before it
    /// appends, so they go out in one write (`Partition::append_batches_together`).
    pub followed: bool,
}

impl ParsedRequest {
    pub(crate) fn correlation_id(&self) -> i32 {
        self.header.correlation_id
    }
}

/// The fixed start of every request header, read before anything is decoded: it says
/// which handler (if any) gets the frame and how to decode the rest of the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RequestHead {
    pub api_key: i16,
    pub version: i16,
    pub correlation_id: i32,
}

/// Reads the API key, version and correlation id at the start of a frame.
pub(crate) fn peek_head(frame: &[u8]) -> Result<RequestHead, RequestError> {
    match frame {
        [k0, k1, v0, v1, c0, c1, c2, c3, ..] => Ok(RequestHead {
            api_key: i16::from_be_bytes([*k0, *k1]),
            version: i16::from_be_bytes([*v0, *v1]),
            correlation_id: i32::from_be_bytes([*c0, *c1, *c2, *c3]),
        }),
        _ => Err(RequestError::Truncated(frame.len())),
    }
}

/// Decodes the request header of `frame`, whose head was read by [`peek_head`] and whose
/// API key and version the caller has resolved; the body is left for its handler.
pub(crate) fn decode_header(
    mut frame: Bytes,
    api_key: ApiKey,
    head: RequestHead,
) -> Result<ParsedRequest, RequestError> {
    let header_version = api_key.request_header_version(head.version);
    let header =
        RequestHeader::decode(&mut frame, header_version).map_err(|e| RequestError::BadHeader {
            correlation_id: head.correlation_id,
            reason: e.to_string(),
        })?;
    Ok(ParsedRequest {
        api_key,
        version: head.version,
        header,
        body: frame,
        followed: false,
    })
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
    fn short_frames_have_no_head() {
        assert_eq!(peek_head(b"abc"), Err(RequestError::Truncated(3)));
        assert_eq!(
            peek_head(&[0, 3, 0, 9, 0, 0, 0, 7]),
            Ok(RequestHead {
                api_key: 3,
                version: 9,
                correlation_id: 7
            })
        );
    }

    #[test]
    fn api_versions_header_parses() {
        let mut f = BytesMut::new();
        f.put_i16(ApiKey::ApiVersions as i16);
        f.put_i16(0);
        f.put_i32(42);
        f.put_i16(3);
        f.put_slice(b"cli");
        let head = peek_head(&f).unwrap();
        let r = decode_header(f.freeze(), ApiKey::ApiVersions, head).unwrap();
        assert_eq!(r.correlation_id(), 42);
        assert_eq!(r.header.client_id.as_deref(), Some("cli"));
        assert!(r.body.is_empty());
    }
}
