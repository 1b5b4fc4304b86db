//! One client connection: read into a buffer, start every complete request in it, and
//! write the answers in request order with one vectored write (plus sendfile for fetched
//! records) per round. A request we cannot parse closes the connection and nothing else.
//!
//! Requests are answered in order and, like Kafka, one at a time — except consecutive
//! Produce requests, which may overlap: each appends as soon as it is started (in request
//! order), and their waits for the fsync that acks=all calls for run together, so the
//! in-flight requests of one producer share group commits instead of paying one fsync each.
//! Started requests live in an [`Inflight`] set, which finishes in one poll what waits
//! only a turn (the Produce requests of one read queueing for one write).
//!
//! Every request holds memory from the listener's request pool (`memory_pool.rs`) from
//! the moment its size is read until it is answered; while the pool is short the
//! connection reads nothing.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures_util::FutureExt;
use kafka_protocol::messages::ApiKey;
use nagare_listener::Stream;
use tokio::io::AsyncReadExt;
use tokio::sync::watch;

use crate::codec::{self, RequestError};
use crate::handlers::{self, api_versions};
use crate::inflight::Inflight;
use crate::memory_pool::{Lease, TooLargeForPool};
use crate::meters::RequestTimer;
use crate::output::OutQueue;
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

const READ_CHUNK: usize = 64 * 1024;
/// Buffer growth per read while a large request is arriving: the buffer grows as bytes
/// actually come, not by what the size prefix claims.
const MAX_RESERVE: usize = 1024 * 1024;
/// Produce requests of one connection in progress at once (Kafka clients send at most 5).
const MAX_PIPELINE: usize = 16;

/// A started request: resolves to its correlation id, header kind and answer.
type Pending = Pin<Box<dyn Future<Output = Answer> + Send>>;

struct Answer {
    correlation_id: i32,
    header_v1: bool,
    reply: Result<Reply, KafkaError>,
}

pub(crate) async fn run(
    stream: Stream,
    state: Arc<KafkaState>,
    session: Arc<Session>,
    shutdown: watch::Receiver<bool>,
) -> Result<(), KafkaError> {
    let mut inflight: Inflight<Pending> = Inflight::default();
    let result = serve(stream, state, session, shutdown, &mut inflight).await;
    // However the connection ended (the client closed it right after an acks=0 produce,
    // a write failed, a later request was refused), the requests it had started are
    // carried out: a produce that arrived whole is applied, never dropped half-way.
    while inflight.next().await.is_some() {}
    result
}

async fn serve(
    mut stream: Stream,
    state: Arc<KafkaState>,
    session: Arc<Session>,
    mut shutdown: watch::Receiver<bool>,
    inflight: &mut Inflight<Pending>,
) -> Result<(), KafkaError> {
    let limit = state.config.max_request_bytes as usize;
    let flush_at = state.config.max_pending_response_bytes as usize;
    let mut inbuf = BytesMut::with_capacity(READ_CHUNK);
    let mut out = OutQueue::default();
    // The client closed its side: what it sent before is still run and answered.
    let mut eof = false;
    // Request-pool memory for the frame at the front of `inbuf`, taken once its size is
    // known and before its body is read; it travels with the request until the answer.
    let mut lease: Option<Lease> = None;
    loop {
        // Start every complete request in the buffer that memory is granted for.
        while inflight.len() < MAX_PIPELINE && !session.closing() {
            let size = match codec::peek_frame_size(&inbuf, limit) {
                Ok(Some(size)) => size,
                Ok(None) => break,
                Err(e) => {
                    finish(inflight, &mut out, &mut stream).await?;
                    return Err(refused(e));
                }
            };
            if lease.is_none() {
                match state.request_pool.try_lease(size) {
                    Ok(Some(granted)) => lease = Some(granted),
                    // The pool is short: wait for memory below, reading nothing more.
                    Ok(None) => break,
                    Err(e) => {
                        finish(inflight, &mut out, &mut stream).await?;
                        return Err(refused_by_pool(e));
                    }
                }
            }
            let frame = match codec::next_frame(&mut inbuf, limit) {
                Ok(Some(frame)) => frame,
                // The body is still arriving (its size was checked above).
                _ => break,
            };
            let followed = matches!(codec::peek_frame_size(&inbuf, limit),
                Ok(Some(size)) if inbuf.len() >= 4 + size);
            let (pending, overlaps) = start(&state, &session, frame, followed, lease.take());
            if !overlaps {
                // Everything but Produce runs alone, after what came before it.
                finish(inflight, &mut out, &mut stream).await?;
            }
            inflight.push_back(pending);
            if !overlaps {
                finish(inflight, &mut out, &mut stream).await?;
            }
            if out.pending_bytes() >= flush_at {
                out.flush(&mut stream).await?;
            }
        }
        // Answers ready so far go out now; produce requests still waiting for an fsync are
        // answered in a later write.
        if !out.is_empty() {
            out.flush(&mut stream).await?;
        }
        if session.closing() && inflight.is_empty() {
            return Ok(());
        }
        let front = codec::peek_frame_size(&inbuf, limit).ok().flatten();
        let need = match front {
            Some(size) => (4 + size).saturating_sub(inbuf.len()),
            None => READ_CHUNK,
        };
        // A known request without memory: wait for the pool instead of reading, so the
        // client is slowed down by TCP rather than the broker's heap growing.
        let wanted = front.filter(|_| lease.is_none());
        if eof && inflight.is_empty() && wanted.is_none() {
            // Every whole request the client sent has been answered; a partial one at the
            // end of the buffer can never complete.
            return Ok(());
        }
        let can_read = !eof && inflight.len() < MAX_PIPELINE && wanted.is_none();
        if can_read {
            inbuf.reserve(need.clamp(READ_CHUNK, MAX_RESERVE));
        }
        tokio::select! {
            Some(answer) = inflight.next(), if !inflight.is_empty() => {
                let mut result = queue(answer, &mut out);
                // Whatever else is done goes out in the same write.
                while result.is_ok() {
                    match inflight.next().now_or_never() {
                        Some(Some(answer)) => result = queue(answer, &mut out),
                        _ => break,
                    }
                }
                out.flush(&mut stream).await?;
                result?;
            }
            granted = state.request_pool.lease(wanted.unwrap_or(0)), if wanted.is_some() => {
                lease = Some(granted.map_err(refused_by_pool)?);
            }
            read = stream.read_buf(&mut inbuf), if can_read => {
                if read? == 0 {
                    eof = true;
                }
            }
            _ = shutdown.changed() => return Ok(()),
        }
    }
}

/// Waits for every started request and queues the answers; an error closes the connection
/// after the answers before it are written.
async fn finish(
    inflight: &mut Inflight<Pending>,
    out: &mut OutQueue,
    stream: &mut Stream,
) -> Result<(), KafkaError> {
    while let Some(answer) = inflight.next().await {
        if let Err(e) = queue(answer, out) {
            out.flush(stream).await?;
            return Err(e);
        }
    }
    Ok(())
}

fn queue(answer: Answer, out: &mut OutQueue) -> Result<(), KafkaError> {
    let reply = answer.reply?;
    out.push_response(answer.correlation_id, answer.header_v1, reply);
    Ok(())
}

/// Starts one request frame holding `lease` until it is answered; returns it and whether
/// it may overlap other Produce requests.
fn start(
    state: &Arc<KafkaState>,
    session: &Arc<Session>,
    frame: Bytes,
    followed: bool,
    lease: Option<Lease>,
) -> (Pending, bool) {
    let ready = |correlation_id, header_v1, reply| -> Pending {
        Box::pin(std::future::ready(Answer {
            correlation_id,
            header_v1,
            reply,
        }))
    };
    let (handler, mut req) = match handlers::route(frame) {
        Ok(routed) => routed,
        Err(RequestError::UnsupportedVersion {
            key,
            correlation_id,
            ..
        }) if key == ApiKey::ApiVersions as i16 => {
            // A newer client: tell it our versions (in v0) and let it retry.
            return (
                ready(
                    correlation_id,
                    false,
                    api_versions::unsupported_version_reply(),
                ),
                false,
            );
        }
        Err(e) => return (ready(0, false, Err(refused(e))), false),
    };
    req.followed = followed;
    let correlation_id = req.correlation_id();
    session.saw_client_id(req.header.client_id.as_deref());
    let timer = RequestTimer::start(req.api_key, req.version);
    if !session.may_proceed() && !before_login(req.api_key) {
        tracing::info!(peer = %session.peer, api = ?req.api_key, "request before authentication; closing connection");
        return (
            ready(
                correlation_id,
                false,
                Err(KafkaError::Unauthenticated(req.api_key as i16)),
            ),
            false,
        );
    }
    let header_v1 = handlers::response_header_v1(&req);
    let overlaps = req.api_key == ApiKey::Produce;
    let call = (handler.call)(state.clone(), session.clone(), req);
    let key = handler.key;
    let pending: Pending = Box::pin(call.map(move |reply| {
        // Answered: the request's memory goes back to the pool.
        drop(lease);
        timer.done();
        if let Err(e) = &reply {
            tracing::warn!(api = ?key, error = %e, "kafka request failed; closing connection");
        }
        Answer {
            correlation_id,
            header_v1,
            reply,
        }
    }));
    (pending, overlaps)
}

/// What a client may send before it has authenticated.
fn before_login(key: ApiKey) -> bool {
    matches!(
        key,
        ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
    )
}

fn refused_by_pool(e: TooLargeForPool) -> KafkaError {
    // As Kafka does, a request that could never fit is refused by closing the connection.
    tracing::warn!(error = %e, "refusing kafka request; closing connection");
    KafkaError::TooLarge {
        size: e.size,
        limit: e.capacity,
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
