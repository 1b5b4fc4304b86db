//! One connection to one broker: TCP (TLS when configured), ApiVersions, SASL, then
//! requests pipelined with correlation ids. A writer task sends whole frames in order; a
//! reader task hands each response to the request waiting for its correlation id. Every
//! response length is bounded before anything is read, every body walked by the
//! allocation guard before it is decoded, and every request answered within the request
//! timeout or the connection is closed (as Kafka's clients do: a late answer could
//! otherwise be taken for the next one's).

use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

use crate::config::Settings;
use crate::{security, ShareError};

/// A plain or TLS stream.
pub(crate) trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}
type Stream = Box<dyn Io>;

/// Frames queued for the writer task; a sender waits beyond that.
const QUEUED_FRAMES: usize = 64;
/// A response body grows by at most this much per read, so a length that lies costs
/// no more memory than the bytes that really arrive.
const READ_CHUNK: usize = 1024 * 1024;

type Waiter = oneshot::Sender<Result<Bytes, ShareError>>;

struct State {
    next_id: i32,
    waiting: HashMap<i32, Waiter>,
    /// Why the connection is closed; every later request fails with it.
    closed: Option<ShareError>,
}

pub(crate) struct Conn {
    addr: String,
    state: Arc<Mutex<State>>,
    frames: mpsc::Sender<Bytes>,
    versions: HashMap<i16, (i16, i16)>,
    client_id: StrBytes,
    timeout: Duration,
    tasks: [AbortHandle; 2],
}

impl Drop for Conn {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn unreachable(addr: &str, what: impl std::fmt::Display) -> ShareError {
    ShareError::Unreachable(format!("{addr}: {what}"))
}

impl Conn {
    /// Connects to `addr` (`host:port`), asks for its API versions and logs in, all within
    /// the request timeout.
    pub(crate) async fn connect(addr: &str, settings: &Settings) -> Result<Conn, ShareError> {
        let limit = settings.request_timeout;
        let setup = async {
            let tcp = TcpStream::connect(addr)
                .await
                .map_err(|e| unreachable(addr, e))?;
            let _ = tcp.set_nodelay(true);
            let stream: Stream = match &settings.security.tls {
                Some(tls) => Box::new(tls.connect(addr, tcp).await?),
                None => Box::new(tcp),
            };
            let mut conn = Conn::start(addr, stream, settings);
            conn.versions = conn.api_versions().await?;
            if let Some(login) = &settings.security.sasl {
                security::authenticate(&conn, login).await?;
            }
            Ok(conn)
        };
        tokio::time::timeout(limit, setup)
            .await
            .unwrap_or_else(|_| {
                Err(unreachable(
                    addr,
                    format_args!("no connection within {limit:?}"),
                ))
            })
    }

    fn start(addr: &str, stream: Stream, settings: &Settings) -> Conn {
        let state = Arc::new(Mutex::new(State {
            next_id: 1,
            waiting: HashMap::new(),
            closed: None,
        }));
        let (read, write) = tokio::io::split(stream);
        let (frames, queue) = mpsc::channel(QUEUED_FRAMES);
        let reader = tokio::spawn(read_frames(
            read,
            state.clone(),
            settings.max_response_bytes,
            addr.to_string(),
        ));
        let writer = tokio::spawn(write_frames(write, queue, state.clone(), addr.to_string()));
        Conn {
            addr: addr.to_string(),
            state,
            frames,
            versions: HashMap::new(),
            client_id: StrBytes::from_string(settings.client_id.clone()),
            timeout: settings.request_timeout,
            tasks: [reader.abort_handle(), writer.abort_handle()],
        }
    }

    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    pub(crate) fn is_alive(&self) -> bool {
        self.state.lock().closed.is_none()
    }

    /// Closes the connection: requests in flight and later ones fail with `why`.
    pub(crate) fn close(&self, why: ShareError) {
        fail(&self.state, why);
        for t in &self.tasks {
            t.abort();
        }
    }

    /// The highest version of `key` both the broker and this client (`ours`) speak.
    pub(crate) fn version(&self, key: ApiKey, ours: RangeInclusive<i16>) -> Option<i16> {
        let (min, max) = *self.versions.get(&(key as i16))?;
        let v = max.min(*ours.end());
        (v >= min.max(*ours.start())).then_some(v)
    }

    /// [`Conn::version`], or the error saying the broker lacks it.
    pub(crate) fn require(
        &self,
        key: ApiKey,
        ours: RangeInclusive<i16>,
    ) -> Result<i16, ShareError> {
        self.version(key, ours.clone()).ok_or_else(|| {
            let offered = match self.versions.get(&(key as i16)) {
                Some((a, b)) => format!("v{a}-{b}"),
                None => "none".into(),
            };
            ShareError::Protocol(format!(
                "{}: {key:?} needs v{}-{}, the broker offers {offered}",
                self.addr,
                ours.start(),
                ours.end()
            ))
        })
    }

    /// Sends `req` at `version` and waits for its answer, at most the request timeout
    /// plus `extra_wait` (a share fetch's time at the broker).
    pub(crate) async fn request<R: Request>(
        &self,
        req: &R,
        version: i16,
        extra_wait: Duration,
    ) -> Result<R::Response, ShareError> {
        let key = ApiKey::try_from(R::KEY)
            .map_err(|_| ShareError::Protocol(format!("unknown API key {}", R::KEY)))?;
        let (id, answer) = {
            let mut s = self.state.lock();
            if let Some(e) = &s.closed {
                return Err(e.clone());
            }
            let id = s.next_id;
            // Correlation ids stay positive; wrapping takes billions of requests.
            s.next_id = if id == i32::MAX { 1 } else { id + 1 };
            let (tx, rx) = oneshot::channel();
            s.waiting.insert(id, tx);
            (id, rx)
        };
        // Forgets the waiter however this future ends (answered, failed, or dropped).
        let _forget = Forget {
            state: &self.state,
            id,
        };
        let frame = self.encode(key, version, id, req)?;
        let limit = self.timeout + extra_wait;
        let exchange = async {
            let closed = || unreachable(&self.addr, "connection closed");
            self.frames.send(frame).await.map_err(|_| closed())?;
            answer.await.map_err(|_| closed())?
        };
        let body = match tokio::time::timeout(limit, exchange).await {
            Ok(answer) => answer?,
            Err(_) => {
                let e = unreachable(
                    &self.addr,
                    format_args!("no answer to {key:?} within {limit:?}"),
                );
                self.close(e.clone());
                return Err(e);
            }
        };
        decode::<R>(key, version, id, body).map_err(|e| {
            let e = ShareError::Protocol(format!("{}: {key:?} v{version} answer: {e}", self.addr));
            // A connection whose answers cannot be read is not used again.
            self.close(e.clone());
            e
        })
    }

    fn encode<R: Encodable>(
        &self,
        key: ApiKey,
        version: i16,
        id: i32,
        req: &R,
    ) -> Result<Bytes, ShareError> {
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(id)
            .with_client_id(Some(self.client_id.clone()));
        let mut buf = BytesMut::with_capacity(256);
        buf.put_i32(0);
        header
            .encode(&mut buf, key.request_header_version(version))
            .and_then(|()| req.encode(&mut buf, version))
            .map_err(|e| ShareError::Protocol(format!("encoding {key:?} v{version}: {e}")))?;
        let len = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&len.to_be_bytes());
        Ok(buf.freeze())
    }

    async fn api_versions(&self) -> Result<HashMap<i16, (i16, i16)>, ShareError> {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("nagare-share-client"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let resp: ApiVersionsResponse = self.request(&req, 3, Duration::ZERO).await?;
        if resp.error_code != 0 {
            return Err(ShareError::kafka(resp.error_code, None));
        }
        Ok(resp
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect())
    }
}

struct Forget<'a> {
    state: &'a Mutex<State>,
    id: i32,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.state.lock().waiting.remove(&self.id);
    }
}

fn decode<R: Request>(
    key: ApiKey,
    version: i16,
    id: i32,
    mut body: Bytes,
) -> Result<R::Response, String> {
    let header = ResponseHeader::decode(&mut body, key.response_header_version(version))
        .map_err(|e| e.to_string())?;
    if header.correlation_id != id {
        return Err(format!(
            "correlation id {} for request {id}",
            header.correlation_id
        ));
    }
    nagare_kafka_guard::check_response(key, version, &body).map_err(|e| e.to_string())?;
    R::Response::decode(&mut body, version).map_err(|e| e.to_string())
}

/// Closes the connection's state: every waiting request gets `why`.
fn fail(state: &Mutex<State>, why: ShareError) {
    let waiting: Vec<Waiter> = {
        let mut s = state.lock();
        if s.closed.is_none() {
            s.closed = Some(why.clone());
        }
        s.waiting.drain().map(|(_, w)| w).collect()
    };
    for w in waiting {
        let _ = w.send(Err(why.clone()));
    }
}

async fn read_frames(
    mut read: ReadHalf<Stream>,
    state: Arc<Mutex<State>>,
    max: usize,
    addr: String,
) {
    let why = loop {
        let mut len = [0u8; 4];
        if let Err(e) = read.read_exact(&mut len).await {
            break unreachable(&addr, format_args!("connection closed ({e})"));
        }
        let len = i32::from_be_bytes(len);
        if len < 4 || len as usize > max {
            break ShareError::Protocol(format!("{addr}: response of {len} bytes (limit {max})"));
        }
        let len = len as usize;
        let mut frame = BytesMut::new();
        let mut failed = None;
        while frame.len() < len {
            let start = frame.len();
            frame.resize(start + (len - start).min(READ_CHUNK), 0);
            if let Err(e) = read.read_exact(&mut frame[start..]).await {
                failed = Some(unreachable(&addr, format_args!("connection closed ({e})")));
                break;
            }
        }
        if let Some(e) = failed {
            break e;
        }
        let id = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
        let waiter = state.lock().waiting.remove(&id);
        match waiter {
            Some(w) => {
                let _ = w.send(Ok(frame.freeze()));
            }
            // Its request gave up (timed out or was dropped) after sending.
            None => tracing::debug!(%addr, id, "answer to a request no longer awaited"),
        }
    };
    tracing::debug!(%addr, error = %why, "kafka connection closed");
    fail(&state, why);
}

async fn write_frames(
    mut write: WriteHalf<Stream>,
    mut queue: mpsc::Receiver<Bytes>,
    state: Arc<Mutex<State>>,
    addr: String,
) {
    while let Some(frame) = queue.recv().await {
        let sent = async {
            write.write_all(&frame).await?;
            // Several frames queued together leave in one flush (one TLS record).
            while let Ok(more) = queue.try_recv() {
                write.write_all(&more).await?;
            }
            write.flush().await
        };
        if let Err(e) = sent.await {
            fail(
                &state,
                unreachable(&addr, format_args!("write failed ({e})")),
            );
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ShareClientConfig;
    use tokio::net::TcpListener;

    fn settings(timeout_ms: u64) -> Settings {
        Settings::from_config(&ShareClientConfig {
            bootstrap: vec!["127.0.0.1:1".into()],
            request_timeout: Duration::from_millis(timeout_ms),
            ..Default::default()
        })
        .unwrap()
    }

    /// A hostile peer speaking raw frames: what no real broker sends (a lying length,
    /// silence), to show the connection's bounds. Everything else is tested against real
    /// servers (`tests/`).
    async fn raw_server(reply: impl Fn(i32) -> Vec<u8> + Send + 'static) -> String {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            loop {
                let mut len = [0u8; 4];
                if s.read_exact(&mut len).await.is_err() {
                    return;
                }
                let mut req = vec![0u8; i32::from_be_bytes(len) as usize];
                s.read_exact(&mut req).await.unwrap();
                let id = i32::from_be_bytes([req[4], req[5], req[6], req[7]]);
                let out = reply(id);
                if s.write_all(&out).await.is_err() {
                    return;
                }
            }
        });
        addr
    }

    #[tokio::test]
    async fn an_oversized_length_closes_the_connection() {
        let addr = raw_server(|_| (i32::MAX).to_be_bytes().to_vec()).await;
        let err = Conn::connect(&addr, &settings(2000)).await.err().unwrap();
        assert!(
            matches!(err, ShareError::Protocol(ref m) if m.contains("limit")),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_silent_broker_times_out() {
        let addr = raw_server(|_| Vec::new()).await;
        let started = std::time::Instant::now();
        let err = Conn::connect(&addr, &settings(300)).await.err().unwrap();
        assert!(matches!(err, ShareError::Unreachable(_)), "{err}");
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn a_refused_connection_is_unreachable() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        drop(l);
        let err = Conn::connect(&addr, &settings(2000)).await.err().unwrap();
        assert!(matches!(err, ShareError::Unreachable(_)), "{err}");
    }
}
