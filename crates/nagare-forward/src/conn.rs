//! One forward connection: read into a buffer, decode every complete request in it,
//! append them in order (consecutive small requests of one tag as one batch, see
//! `merge`), make them as durable as their acks require with one fsync per partition
//! (group commit), then write all acks with one write. While one round waits for its
//! fsync, the next is read and appended (two rounds at most), so a sender keeping
//! several chunks in flight is not held to one fsync per round trip.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use nagare_core::security::{Principal, Security};
use nagare_core::{Broker, Partition};
use nagare_listener::Stream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::auth::{Handshake, Users};
use crate::authz::TopicAccess;
use crate::budget::{Budget, Share};
use crate::config::Config;
use crate::decode::{Decoder, Frame, Mode, Request};
use crate::error::DecodeError;
use crate::ingest::{ack_bytes, Ingest, IngestError};
use crate::merge::Merge;
use crate::route::Router;

/// Read granularity; a chunk larger than this grows the buffer to what the decoder
/// says it needs (bounded by `max_chunk_bytes`).
const READ_SIZE: usize = 256 * 1024;
/// Acks are flushed at least every this many requests or events even if more are
/// buffered (many small Message-mode requests fit in one read; few large chunks do).
const MAX_REQUESTS_PER_ROUND: usize = 1024;
const MAX_EVENTS_PER_ROUND: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnError {
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Decode(#[from] DecodeError),
    #[error("{0}")]
    Ingest(#[from] IngestError),
    #[error("authentication failed: {0}")]
    Auth(String),
    #[error("request before the handshake finished")]
    NoHandshake,
    #[error("idle for longer than {0:?}")]
    Idle(Duration),
    #[error("connection closed inside a request ({0} bytes buffered)")]
    TruncatedAtClose(usize),
    #[error("request of at least {size} bytes exceeds max_buffered_bytes {limit}")]
    OverBufferCap { size: usize, limit: usize },
}

impl ConnError {
    /// A short label for logs and the `reason` of the close counter.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            ConnError::Io(_) => "io",
            ConnError::Decode(_) | ConnError::OverBufferCap { .. } => "malformed",
            ConnError::Ingest(IngestError::NotAuthorized(_)) => "not_authorized",
            ConnError::Ingest(_) => "storage",
            ConnError::Auth(_) | ConnError::NoHandshake => "auth",
            ConnError::Idle(_) => "idle",
            ConnError::TruncatedAtClose(_) => "truncated",
        }
    }
}

/// Shared by every connection of a listener.
pub struct Shared {
    pub broker: Arc<Broker>,
    pub router: Arc<Router>,
    pub config: Config,
    /// The receiver-wide memory cap.
    pub budget: Arc<Budget>,
    /// Users (forward secrets), ACLs and the failed-login throttle.
    pub security: Security,
}

/// Who is on the other end, as the listener knows it.
pub(crate) struct Peer {
    pub addr: SocketAddr,
    /// From a verified TLS client certificate, else anonymous.
    pub principal: Principal,
    /// The listener demands authentication: the handshake with a user is mandatory
    /// (unless the certificate already named one).
    pub auth_required: bool,
    /// The connection's registry entry (the handshake's user).
    pub info: Arc<nagare_listener::ConnectionInfo>,
}

impl Shared {
    pub fn new(broker: Arc<Broker>, router: Router, config: Config, security: Security) -> Shared {
        let cap = usize::try_from(config.max_buffered_bytes).unwrap_or(usize::MAX);
        Shared {
            broker,
            router: Arc::new(router),
            budget: Arc::new(Budget::new(cap)),
            config,
            security,
        }
    }
}

pub(crate) async fn handle(
    mut stream: Stream,
    shared: Arc<Shared>,
    peer: Peer,
) -> Result<u64, ConnError> {
    let cfg = &shared.config;
    let mut decoder = Decoder::new(cfg.limits());
    let mut ingest = Ingest::new(
        shared.broker.clone(),
        shared.router.clone(),
        &cfg.dead_letter_topic,
    );
    let mut buf = BytesMut::with_capacity(READ_SIZE);
    let mut share = Share::new(shared.budget.clone());
    let cap = shared.budget.cap();
    let meters = Meters::new();
    let idle = (cfg.idle_timeout_ms > 0).then(|| Duration::from_millis(cfg.idle_timeout_ms));

    // A certificate that named the peer stands for the handshake's user.
    let known = peer.principal != Principal::Anonymous;
    let users = Users {
        required: !cfg.users.is_empty() || (peer.auth_required && !known),
        config: &cfg.users,
        store: Some(&shared.security.users),
    };
    let mut handshake = None;
    if !cfg.shared_key.is_empty() || (peer.auth_required && !known) {
        let h = Handshake::new();
        stream.write_all(&h.helo(users.required)).await?;
        handshake = Some(h);
    }
    let mut principal = peer.principal.clone();
    if handshake.is_none() {
        ingest.set_access(TopicAccess::new(
            &shared.security,
            principal.clone(),
            peer.addr.ip(),
        ));
    }

    let mut more_buffered = false;
    // The previous round, appended, waiting for its fsyncs before its acks go out. While
    // it waits, the next round is read and appended: the sender's next chunks join the
    // next group commit instead of waiting behind this one (at most one round waits).
    let mut waiting: Option<Round> = None;
    let mut spare_out: Vec<u8> = Vec::with_capacity(1024);
    loop {
        if !more_buffered {
            // Room for what the decoder knows the next frame needs (bounded by
            // max_chunk_bytes), and at least one read's worth, within the shared cap.
            let need = decoder.need();
            if need > cap || buf.len() >= cap {
                return Err(ConnError::OverBufferCap {
                    size: need.max(buf.len() + 1),
                    limit: cap,
                });
            }
            let want = need
                .saturating_sub(buf.len())
                .max(READ_SIZE)
                .min(cap - buf.len());
            // Backpressure: wait here, not reading, while every connection's unappended
            // bytes together are at the cap.
            let more = (buf.len() + want).saturating_sub(share.held());
            share.reserve(more, !buf.is_empty()).await;
            buf.reserve(want);
            // The waiting round's acks go out as soon as its fsync is done, whether or
            // not the sender has more to say (it may be waiting for exactly those acks).
            // The read is then dropped (`read_buf` is cancel-safe) and started again.
            let n = loop {
                // A sender waiting for acks is not idle: no timeout while a round waits.
                let timeout = if waiting.is_some() { None } else { idle };
                let read = read_some(&mut stream, (&mut buf).limit(want), timeout);
                let Some(durable) = waiting.as_mut().and_then(|r| r.durable.as_mut()) else {
                    break read.await?;
                };
                tokio::select! {
                    biased;
                    done = durable => {
                        done?;
                        if let Some(round) = waiting.take() {
                            spare_out = round.acknowledge(&mut stream, &meters).await?;
                        }
                    }
                    n = read => break n?,
                }
            };
            if n == 0 {
                if let Some(round) = waiting.take() {
                    round.finish(&mut stream, &meters).await?;
                }
                if buf.is_empty() {
                    return Ok(ingest.events);
                }
                return Err(ConnError::TruncatedAtClose(buf.len()));
            }
        }

        let mut unacked = Unacked {
            out: std::mem::take(&mut spare_out),
            ..Unacked::default()
        };
        let mut requests = 0;
        let mut events = 0;
        let mut merge = Merge::default();
        // A failure ends the connection, but only after the requests before it are made
        // durable and acknowledged (the sender then resends less).
        let mut failure: Option<ConnError> = None;
        loop {
            let frame = match decoder.decode(&mut buf) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    metrics::counter!("nagare_forward_decode_errors_total").increment(1);
                    failure = Some(e.into());
                    break;
                }
            };
            // Merged requests are appended before anything that is not merged with them.
            let joins = matches!(&frame, Frame::Request(r)
                if handshake.is_none() && Merge::mergeable(r) && merge.accepts(r));
            if !joins {
                if let Some(m) = merge.take() {
                    let (req, chunks, n) = (&m.request, m.chunks.as_slice(), m.requests);
                    if let Err(e) = append(&mut ingest, req, chunks, n, &meters, &mut unacked).await
                    {
                        failure = Some(e.into());
                        break;
                    }
                }
            }
            match frame {
                Frame::Nil => {}
                Frame::Ping(ping) => {
                    let Some(h) = handshake.as_ref() else {
                        failure = Some(DecodeError::Shape("PING without a handshake").into());
                        break;
                    };
                    let pong = h.pong(&ping, &cfg.shared_key, &cfg.self_hostname, &users);
                    if !pong.ok {
                        let user = String::from_utf8_lossy(&ping.username);
                        let throttle = &shared.security.throttle;
                        tokio::time::sleep(throttle.failed("forward", peer.addr.ip(), &user)).await;
                    }
                    // Before the handshake no request was taken: no acks are waiting.
                    stream.write_all(&pong.bytes).await?;
                    if !pong.ok {
                        let _ = stream.shutdown().await;
                        return Err(ConnError::Auth(pong.reason));
                    }
                    if let Some(user) = &pong.user {
                        peer.info.set_user(user);
                        shared.security.throttle.succeeded(peer.addr.ip());
                        principal = Principal::user(user);
                    }
                    ingest.set_access(TopicAccess::new(
                        &shared.security,
                        principal.clone(),
                        peer.addr.ip(),
                    ));
                    handshake = None;
                }
                Frame::Request(req) => {
                    if handshake.is_some() {
                        failure = Some(ConnError::NoHandshake);
                        break;
                    }
                    requests += 1;
                    events += req.entries.len();
                    if joins {
                        merge.push(req);
                    } else {
                        let chunks = req.chunk.as_slice();
                        if let Err(e) =
                            append(&mut ingest, &req, chunks, 1, &meters, &mut unacked).await
                        {
                            failure = Some(e.into());
                            break;
                        }
                    }
                    if requests >= MAX_REQUESTS_PER_ROUND || events >= MAX_EVENTS_PER_ROUND {
                        break;
                    }
                }
            }
        }
        // The last merged requests (a failure above already appended those before it).
        if let Some(m) = merge.take() {
            let (req, chunks, n) = (&m.request, m.chunks.as_slice(), m.requests);
            if let Err(e) = append(&mut ingest, req, chunks, n, &meters, &mut unacked).await {
                failure = failure.or(Some(e.into()));
            }
        }
        // The round's requests are in the log and their bytes freed: they no longer
        // count against the cap, though their acks may still wait for an fsync.
        share.release_to(buf.len());
        // Acks go out in order: the waiting round's first.
        if let Some(round) = waiting.take() {
            spare_out = round.finish(&mut stream, &meters).await?;
        }
        let round = Round::new(unacked);
        if let Some(e) = failure {
            round.finish(&mut stream, &meters).await?;
            return Err(e);
        }
        if round.durable.is_some() {
            waiting = Some(round);
        } else {
            spare_out = round.finish(&mut stream, &meters).await?;
        }
        // Requests may be left in the buffer after a full round: decode before reading.
        more_buffered = requests >= MAX_REQUESTS_PER_ROUND || events >= MAX_EVENTS_PER_ROUND;
    }
}

/// One read into `buf`, within the idle timeout.
async fn read_some(
    stream: &mut Stream,
    mut buf: bytes::buf::Limit<&mut BytesMut>,
    idle: Option<Duration>,
) -> Result<usize, ConnError> {
    match idle {
        Some(d) => tokio::time::timeout(d, stream.read_buf(&mut buf))
            .await
            .map_err(|_| ConnError::Idle(d))?
            .map_err(ConnError::from),
        None => Ok(stream.read_buf(&mut buf).await?),
    }
}

/// A round's fsyncs, run as one future.
type Durable = Pin<Box<dyn Future<Output = Result<(), ConnError>> + Send>>;

/// A round of appended requests whose acks wait for the fsyncs they need: durability
/// first, acks after, so an ack never precedes its fsync.
struct Round {
    /// The fsyncs; `None` when the round needs none (its acks may go out at once).
    durable: Option<Durable>,
    /// The acks' bytes and their count.
    out: Vec<u8>,
    acks: u64,
}

impl Round {
    fn new(unacked: Unacked) -> Round {
        let Unacked { syncs, out, acks } = unacked;
        let durable = (!syncs.is_empty()).then(|| {
            Box::pin(async move {
                for (p, offset) in syncs {
                    p.sync_to(offset)
                        .await
                        .map_err(|source| IngestError::Core {
                            topic: p.topic().to_string(),
                            source,
                        })?;
                }
                Ok(())
            }) as Durable
        });
        Round { durable, out, acks }
    }

    /// Waits for the fsyncs, then writes the acks; gives the emptied buffer back.
    async fn finish(mut self, stream: &mut Stream, meters: &Meters) -> Result<Vec<u8>, ConnError> {
        if let Some(durable) = self.durable.as_mut() {
            durable.await?;
        }
        self.acknowledge(stream, meters).await
    }

    /// Writes the acks (the fsyncs are done).
    async fn acknowledge(
        mut self,
        stream: &mut Stream,
        meters: &Meters,
    ) -> Result<Vec<u8>, ConnError> {
        if !self.out.is_empty() {
            stream.write_all(&self.out).await?;
            self.out.clear();
        }
        if self.acks > 0 {
            // Counted once written: an ack is only sent after its fsync.
            meters.acks.increment(self.acks);
        }
        Ok(self.out)
    }
}

/// The connection's counters, looked up in the metrics registry once: `counter!` hashes
/// its name and labels on every call, which cost as much as a Message-mode event's append.
struct Meters {
    /// Per [`Mode`], in `Mode::ALL` order.
    requests: [metrics::Counter; 4],
    events: metrics::Counter,
    chunks: metrics::Counter,
    acks: metrics::Counter,
}

impl Meters {
    fn new() -> Meters {
        Meters {
            requests: Mode::ALL
                .map(|m| metrics::counter!("nagare_forward_requests_total", "mode" => m.name())),
            events: metrics::counter!("nagare_forward_events_total"),
            chunks: metrics::counter!("nagare_forward_chunks_total"),
            acks: metrics::counter!("nagare_forward_acks_total"),
        }
    }

    fn requests(&self, mode: Mode) -> &metrics::Counter {
        // `Mode::ALL` lists the modes in declaration order (a test in `decode.rs`).
        &self.requests[mode as usize]
    }
}

/// What a round's appends leave for their acks: the fsyncs they wait for, the ack bytes
/// and their count.
#[derive(Default)]
struct Unacked {
    syncs: Vec<(Arc<Partition>, i64)>,
    out: Vec<u8>,
    acks: u64,
}

/// Appends one request (standing for `requests` merged ones) and queues the acks of
/// `chunks` for after the fsyncs it needs.
async fn append(
    ingest: &mut Ingest,
    req: &Request,
    chunks: &[Bytes],
    requests: u64,
    meters: &Meters,
    unacked: &mut Unacked,
) -> Result<(), IngestError> {
    let pending = ingest.append(req, !chunks.is_empty()).await?;
    meters.requests(req.mode).increment(requests);
    meters.events.increment(req.entries.len() as u64);
    for (p, offset) in pending.syncs() {
        match unacked.syncs.iter_mut().find(|(q, _)| Arc::ptr_eq(q, &p)) {
            Some((_, o)) => *o = (*o).max(offset),
            None => unacked.syncs.push((p, offset)),
        }
    }
    meters.chunks.increment(chunks.len() as u64);
    for chunk in chunks {
        ack_bytes(&mut unacked.out, chunk);
        unacked.acks += 1;
    }
    Ok(())
}
