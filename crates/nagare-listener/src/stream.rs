//! The byte stream a front end reads and writes: a plain TCP socket, or TLS over one.
//!
//! One type for both so every front end has one code path; the only thing a front end
//! may want to know is whether the socket is plain, to hand file ranges to `sendfile(2)`
//! ([`Stream::plain_tcp`]), which TLS in user space cannot do.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

/// A connection's transport.
pub struct Stream {
    inner: Inner,
    /// Milliseconds (of the listener's clock) of the last byte moved either way, for the
    /// idle timeout; shared with the listener's watchdog.
    activity: Arc<Activity>,
}

enum Inner {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// When a connection last moved a byte, as milliseconds since the listener started, and
/// how many bytes it moved each way (the connection registry shows them).
pub(crate) struct Activity {
    epoch: tokio::time::Instant,
    last_ms: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
}

impl Activity {
    pub(crate) fn new() -> Arc<Activity> {
        Arc::new(Activity {
            epoch: tokio::time::Instant::now(),
            last_ms: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
        })
    }

    fn received(&self, n: usize) {
        self.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
        self.touch();
    }

    /// Counts what a `poll_read` added to `buf` beyond its first `before` bytes.
    fn count_read(&self, before: usize, buf: &ReadBuf<'_>) {
        let after = buf.filled().len();
        if after != before {
            self.received(after - before);
        }
    }

    /// Counts what a `poll_write` or `poll_write_vectored` sent.
    fn count_written(&self, polled: &Poll<io::Result<usize>>) {
        if let Poll::Ready(Ok(n)) = polled {
            if *n > 0 {
                self.sent(*n as u64);
            }
        }
    }

    pub(crate) fn sent(&self, n: u64) {
        self.bytes_out.fetch_add(n, Ordering::Relaxed);
        self.touch();
    }

    pub(crate) fn bytes_in(&self) -> u64 {
        self.bytes_in.load(Ordering::Relaxed)
    }

    pub(crate) fn bytes_out(&self) -> u64 {
        self.bytes_out.load(Ordering::Relaxed)
    }

    fn touch(&self) {
        let now = self.epoch.elapsed().as_millis() as u64;
        // Relaxed: an approximate clock is all the idle check needs.
        if self.last_ms.load(Ordering::Relaxed) != now {
            self.last_ms.store(now, Ordering::Relaxed);
        }
    }

    /// How long ago the last byte moved.
    pub(crate) fn idle_for(&self) -> std::time::Duration {
        let now = self.epoch.elapsed().as_millis() as u64;
        std::time::Duration::from_millis(now.saturating_sub(self.last_ms.load(Ordering::Relaxed)))
    }
}

impl Stream {
    pub(crate) fn plain(tcp: TcpStream, activity: Arc<Activity>) -> Stream {
        Stream {
            inner: Inner::Plain(tcp),
            activity,
        }
    }

    pub(crate) fn tls(tls: TlsStream<TcpStream>, activity: Arc<Activity>) -> Stream {
        Stream {
            inner: Inner::Tls(Box::new(tls)),
            activity,
        }
    }

    /// A plain stream over `tcp`, for tests and tools that build connections themselves.
    pub fn from_tcp(tcp: TcpStream) -> Stream {
        Stream::plain(tcp, Activity::new())
    }

    /// The socket itself when nothing sits between it and the peer (no TLS): then bytes
    /// may go out with `sendfile(2)` straight from the page cache.
    pub fn plain_tcp(&self) -> Option<&TcpStream> {
        match &self.inner {
            Inner::Plain(t) => Some(t),
            Inner::Tls(_) => None,
        }
    }

    /// Whether the bytes are encrypted (TLS).
    pub fn is_tls(&self) -> bool {
        matches!(self.inner, Inner::Tls(_))
    }

    /// Records traffic that bypassed this type (a `sendfile` on [`Stream::plain_tcp`]).
    pub fn touch(&self) {
        self.activity.touch();
    }

    /// Records `bytes` sent around this type (a `sendfile` on [`Stream::plain_tcp`]):
    /// counted as sent and as activity.
    pub fn sent_around(&self, bytes: u64) {
        self.activity.sent(bytes);
    }

    /// Splits the stream into a reading and a writing half that can live in different
    /// tasks. A plain socket splits for free, and its writing half still allows
    /// non-blocking writes from a shared reference ([`WriteHalf::Plain`]); a TLS stream
    /// shares one session between the halves (a lock taken per operation).
    pub fn into_split(self) -> (ReadHalf, WriteHalf) {
        match self.inner {
            Inner::Plain(t) => {
                let (r, w) = t.into_split();
                (
                    ReadHalf {
                        inner: ReadInner::Plain(r),
                        activity: self.activity,
                    },
                    WriteHalf::Plain(w),
                )
            }
            Inner::Tls(t) => {
                let (r, w) = tokio::io::split(t);
                (
                    ReadHalf {
                        inner: ReadInner::Tls(r),
                        activity: self.activity,
                    },
                    WriteHalf::Tls(w),
                )
            }
        }
    }

    pub fn peer_addr(&self) -> io::Result<std::net::SocketAddr> {
        match &self.inner {
            Inner::Plain(t) => t.peer_addr(),
            Inner::Tls(t) => t.get_ref().0.peer_addr(),
        }
    }
}

/// The reading half of a split [`Stream`]; what it reads counts as activity.
pub struct ReadHalf {
    inner: ReadInner,
    activity: Arc<Activity>,
}

enum ReadInner {
    Plain(tokio::net::tcp::OwnedReadHalf),
    Tls(tokio::io::ReadHalf<Box<TlsStream<TcpStream>>>),
}

/// The writing half of a split [`Stream`].
pub enum WriteHalf {
    Plain(tokio::net::tcp::OwnedWriteHalf),
    Tls(tokio::io::WriteHalf<Box<TlsStream<TcpStream>>>),
}

impl AsyncRead for ReadHalf {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = match &mut this.inner {
            ReadInner::Plain(t) => Pin::new(t).poll_read(cx, buf),
            ReadInner::Tls(t) => Pin::new(t).poll_read(cx, buf),
        };
        this.activity.count_read(before, buf);
        polled
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = match &mut this.inner {
            Inner::Plain(t) => Pin::new(t).poll_read(cx, buf),
            Inner::Tls(t) => Pin::new(t.as_mut()).poll_read(cx, buf),
        };
        this.activity.count_read(before, buf);
        polled
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = match &mut this.inner {
            Inner::Plain(t) => Pin::new(t).poll_write(cx, buf),
            Inner::Tls(t) => Pin::new(t.as_mut()).poll_write(cx, buf),
        };
        this.activity.count_written(&polled);
        polled
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = match &mut this.inner {
            Inner::Plain(t) => Pin::new(t).poll_write_vectored(cx, bufs),
            Inner::Tls(t) => Pin::new(t.as_mut()).poll_write_vectored(cx, bufs),
        };
        this.activity.count_written(&polled);
        polled
    }

    fn is_write_vectored(&self) -> bool {
        match &self.inner {
            Inner::Plain(t) => t.is_write_vectored(),
            Inner::Tls(t) => t.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().inner {
            Inner::Plain(t) => Pin::new(t).poll_flush(cx),
            Inner::Tls(t) => Pin::new(t.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().inner {
            Inner::Plain(t) => Pin::new(t).poll_shutdown(cx),
            Inner::Tls(t) => Pin::new(t.as_mut()).poll_shutdown(cx),
        }
    }
}

impl AsyncWrite for WriteHalf {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            WriteHalf::Plain(t) => Pin::new(t).poll_write(cx, buf),
            WriteHalf::Tls(t) => Pin::new(t).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            WriteHalf::Plain(t) => Pin::new(t).poll_write_vectored(cx, bufs),
            WriteHalf::Tls(t) => Pin::new(t).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            WriteHalf::Plain(t) => t.is_write_vectored(),
            WriteHalf::Tls(t) => t.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteHalf::Plain(t) => Pin::new(t).poll_flush(cx),
            WriteHalf::Tls(t) => Pin::new(t).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteHalf::Plain(t) => Pin::new(t).poll_shutdown(cx),
            WriteHalf::Tls(t) => Pin::new(t).poll_shutdown(cx),
        }
    }
}
