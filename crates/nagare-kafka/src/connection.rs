//! One client connection: read into a buffer, answer every complete request in it in
//! order, queue the answers and write them with one vectored write (plus sendfile for
//! fetched records) before reading again. A request we cannot parse closes the connection
//! and nothing else.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::codec::{self, RequestError};
use crate::handlers::{self, api_versions};
use crate::output::OutQueue;
use crate::{KafkaError, KafkaState};

const READ_CHUNK: usize = 64 * 1024;
/// Buffer growth per read while a large request is arriving: the buffer grows as bytes
/// actually come, not by what the size prefix claims.
const MAX_RESERVE: usize = 1024 * 1024;

pub async fn run(
    mut stream: TcpStream,
    state: Arc<KafkaState>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), KafkaError> {
    // Latency: every response goes out at once; batching is done by the output queue.
    stream.set_nodelay(true)?;
    let limit = state.config.max_request_bytes as usize;
    let flush_at = state.config.max_pending_response_bytes as usize;
    let mut inbuf = BytesMut::with_capacity(READ_CHUNK);
    let mut out = OutQueue::default();
    loop {
        loop {
            let frame = match codec::next_frame(&mut inbuf, limit) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) => {
                    out.flush(&mut stream).await?;
                    return Err(refused(e));
                }
            };
            let keep_open = answer(&state, frame, &mut out).await;
            if keep_open.is_err() || out.pending_bytes() >= flush_at {
                out.flush(&mut stream).await?;
            }
            keep_open?;
        }
        if !out.is_empty() {
            out.flush(&mut stream).await?;
        }
        let need = match codec::peek_frame_size(&inbuf, limit) {
            Ok(Some(size)) => (4 + size).saturating_sub(inbuf.len()),
            _ => READ_CHUNK,
        };
        inbuf.reserve(need.clamp(READ_CHUNK, MAX_RESERVE));
        tokio::select! {
            read = stream.read_buf(&mut inbuf) => {
                if read? == 0 {
                    return Ok(());
                }
            }
            _ = shutdown.changed() => return Ok(()),
        }
    }
}

/// Answers one request frame, queueing the response. An error means: close.
async fn answer(
    state: &Arc<KafkaState>,
    frame: Bytes,
    out: &mut OutQueue,
) -> Result<(), KafkaError> {
    let req = match codec::parse_request(frame) {
        Ok(req) => req,
        Err(RequestError::UnsupportedVersion {
            key: 18,
            correlation_id,
            ..
        }) => {
            // A newer client: tell it our versions (in v0) and let it retry.
            out.push_response(
                correlation_id,
                false,
                api_versions::unsupported_version_reply()?,
            );
            return Ok(());
        }
        Err(e) => return Err(refused(e)),
    };
    let Some(handler) = handlers::find(req.api_key as i16) else {
        return Err(KafkaError::UnknownApi(req.api_key as i16));
    };
    let correlation_id = req.correlation_id();
    let header_v1 = handlers::response_header_v1(&req);
    match (handler.call)(state.clone(), req).await {
        Ok(reply) => {
            out.push_response(correlation_id, header_v1, reply);
            Ok(())
        }
        Err(e) => {
            tracing::warn!(api = ?handler.key, error = %e, "kafka request failed; closing connection");
            Err(e)
        }
    }
}

fn refused(e: RequestError) -> KafkaError {
    tracing::warn!(error = %e, "refusing kafka request; closing connection");
    match e {
        RequestError::TooLarge { size, limit } => KafkaError::TooLarge { size, limit },
        RequestError::UnknownApi { key, .. } => KafkaError::UnknownApi(key),
        RequestError::UnsupportedVersion { key, version, .. } => {
            KafkaError::UnsupportedVersion { key, version }
        }
        other => KafkaError::Malformed(other.to_string()),
    }
}
