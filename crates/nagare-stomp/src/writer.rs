//! The writing half of a connection.
//!
//! Fast path: whoever has frames for the connection (its own reader, another connection
//! replying to a temp queue, a queue dispatching) writes them straight to the socket when
//! nothing else is queued and the socket takes them all without blocking — no task switch
//! on the RPC path. Otherwise the frames go through a channel to the connection's writer
//! task, which writes everything waiting with one write call (coalescing), sends
//! heart-beats when idle, and settles auto-acked queue messages once written.
//!
//! Producers are bounded: the connection's own replies, topic and temp-queue messages
//! take permits from a byte budget returned after the write; queue messages are bounded by
//! their subscription's prefetch instead. Topic messages also take permits from the
//! listener-wide outbound budget, and they reserve their room *before* reading the log: a
//! subscriber whose socket is full just stops reading and falls behind in the log, so it
//! costs neither memory nor the publisher's time. The writer task never waits for anything
//! but the socket, so no cycle of full buffers between connections can deadlock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use nagare_core::queues::{ConsumerId, Queue};
use nagare_listener::{ConnectionInfo, WriteHalf};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};

use crate::outbox;

/// Stop gathering more frames into one write beyond this many bytes. Small: the copy is
/// held, on top of the budgeted frames, while a slow socket drains.
const MAX_COALESCE: usize = 64 * 1024;

type AutoAck = (Arc<Queue>, ConsumerId, i64);

pub(crate) enum Out {
    Frame(Bytes, Option<OwnedSemaphorePermit>),
    /// Frames read from the log into room reserved beforehand.
    Reserved(Bytes, Reservation),
    /// Frames gathered over a batch of inbound frames, with the permits paying for them.
    Gathered(Bytes, Vec<OwnedSemaphorePermit>),
    /// Queue messages; the acks (ack mode `auto`) are settled once they are written.
    QueueMessages(Bytes, Vec<AutoAck>),
    /// Write what came before, then close the socket.
    Close,
}

/// The socket, shared by the writer task and the fast path.
struct Socket {
    sock: Sink,
    /// Held by whoever writes; the writer task holds it across its whole write.
    lock: tokio::sync::Mutex<()>,
    /// Items sent to the channel and not yet written: the fast path must not overtake them.
    queued: AtomicUsize,
    /// The connection's registry entry: the split writing half bypasses the stream's own
    /// byte count, so what goes out is counted here.
    info: Arc<ConnectionInfo>,
}

/// Where the bytes go.
enum Sink {
    /// A plain socket: non-blocking writes straight from a shared reference, so the fast
    /// path can write from the task that produced a frame.
    Plain(OwnedWriteHalf),
    /// TLS: one writer at a time through the session; no fast path (the writer task
    /// writes everything).
    Tls(tokio::sync::Mutex<WriteHalf>),
}

impl Socket {
    /// Writes all of `bytes` now if the socket is free, nothing is queued and the kernel
    /// takes it without blocking. Returns the bytes untouched if it could not start; if
    /// only part went out, the rest is queued right away (still holding the socket, so
    /// nothing can slip in between) with `rest` making the channel item.
    fn try_direct(
        &self,
        bytes: Bytes,
        tx: &mpsc::UnboundedSender<Out>,
        rest: impl FnOnce(Bytes) -> Out,
    ) -> Result<(), Bytes> {
        let Sink::Plain(sock) = &self.sock else {
            return Err(bytes);
        };
        let Ok(_guard) = self.lock.try_lock() else {
            return Err(bytes);
        };
        if self.queued.load(Ordering::Acquire) != 0 {
            return Err(bytes);
        }
        let total = bytes.len();
        let mut left = bytes;
        while !left.is_empty() {
            match sock.try_write(&left) {
                Ok(n) if n > 0 => left.advance(n),
                _ => break,
            }
        }
        self.info.count_out((total - left.len()) as u64);
        if left.is_empty() {
            return Ok(());
        }
        if left.len() == total {
            return Err(left);
        }
        self.queued.fetch_add(1, Ordering::AcqRel);
        if tx.send(rest(left)).is_err() {
            self.queued.fetch_sub(1, Ordering::AcqRel);
        }
        Ok(())
    }

    async fn write_all(&self, buf: &[u8]) -> std::io::Result<()> {
        let written = self.write_all_uncounted(buf).await;
        if written.is_ok() {
            self.info.count_out(buf.len() as u64);
        }
        written
    }

    async fn write_all_uncounted(&self, mut buf: &[u8]) -> std::io::Result<()> {
        let sock = match &self.sock {
            Sink::Plain(sock) => sock,
            Sink::Tls(tls) => {
                let mut tls = tls.lock().await;
                tls.write_all(buf).await?;
                return tls.flush().await;
            }
        };
        while !buf.is_empty() {
            sock.writable().await?;
            match sock.try_write(buf) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Room for log messages, taken from the connection's and the listener-wide budgets
/// before reading; given back once the bytes are written.
pub(crate) struct Reservation {
    conn: OwnedSemaphorePermit,
    global: OwnedSemaphorePermit,
}

impl Reservation {
    /// Bytes reserved.
    pub(crate) fn len(&self) -> usize {
        self.conn.num_permits()
    }

    /// Gives back what `used` bytes do not need (a reservation never grows: what was read
    /// beyond it, at most one batch, is let through rather than waited for, so two
    /// subscriptions of one connection can never wait on each other's half).
    fn trim(&mut self, used: usize) {
        let surplus = self.len().saturating_sub(used.max(1));
        drop(self.conn.split(surplus));
        drop(self.global.split(surplus));
    }
}

/// The listener-wide budget of bytes read from topic logs and not yet written.
#[derive(Clone)]
pub(crate) struct GlobalBudget {
    sem: Arc<Semaphore>,
    max: usize,
}

impl GlobalBudget {
    pub(crate) fn new(max_bytes: usize) -> GlobalBudget {
        let max = max_bytes.clamp(64 * 1024, u32::MAX as usize / 2);
        GlobalBudget {
            sem: Arc::new(Semaphore::new(max)),
            max,
        }
    }
}

/// A handle to a connection's writer, cloned into everything that sends to it.
#[derive(Clone)]
pub(crate) struct ConnOut {
    pub id: u64,
    tx: mpsc::UnboundedSender<Out>,
    budget: Arc<Semaphore>,
    budget_max: usize,
    global: GlobalBudget,
    socket: Arc<Socket>,
}

impl ConnOut {
    /// Sends bytes (one or more frames): straight to the socket if possible, else queued
    /// for the writer once there is room in the budget. False once the connection is gone.
    pub(crate) async fn send(&self, bytes: Bytes) -> bool {
        if self.tx.is_closed() {
            return false;
        }
        // Inside a reader's batch: gathered with the frames around it when there is room
        // in the budget right away (else what is gathered goes first, then this waits).
        let bytes = if outbox::active() && bytes.len() < outbox::MAX_GATHERED_FRAME {
            let n = bytes.len().clamp(1, self.budget_max) as u32;
            match self.budget.clone().try_acquire_many_owned(n) {
                Ok(permit) => match outbox::gather(self, bytes, Some(permit)) {
                    Ok(()) => return true,
                    Err((untouched, permit)) => {
                        drop(permit);
                        untouched
                    }
                },
                Err(tokio::sync::TryAcquireError::Closed) => return false,
                Err(tokio::sync::TryAcquireError::NoPermits) => {
                    outbox::flush_for(self.id);
                    bytes
                }
            }
        } else {
            outbox::flush_for(self.id);
            bytes
        };
        // A partly written frame's rest is queued outside the budget: it is at most one
        // frame per sender, and senders after it take the budgeted path.
        let bytes = match self
            .socket
            .try_direct(bytes, &self.tx, |rest| Out::Frame(rest, None))
        {
            Ok(()) => return true,
            Err(untouched) => untouched,
        };
        let n = bytes.len().clamp(1, self.budget_max) as u32;
        let permit = match self.budget.clone().try_acquire_many_owned(n) {
            Ok(p) => p,
            Err(tokio::sync::TryAcquireError::Closed) => return false,
            Err(tokio::sync::TryAcquireError::NoPermits) => {
                match self.budget.clone().acquire_many_owned(n).await {
                    Ok(p) => p,
                    Err(_) => return false,
                }
            }
        };
        self.enqueue(Out::Frame(bytes, Some(permit)))
    }

    /// Waits for room for about `want` bytes (at most a quarter of the connection's
    /// budget, so replies and a second subscription still fit) in the connection's budget,
    /// then in the listener-wide one. None once the connection is gone.
    pub(crate) async fn reserve(&self, want: usize) -> Option<Reservation> {
        let n = want
            .clamp(1, (self.budget_max / 4).max(1))
            .min(self.global.max) as u32;
        let conn = self.budget.clone().acquire_many_owned(n).await.ok()?;
        let global = self.global.sem.clone().acquire_many_owned(n).await.ok()?;
        if self.tx.is_closed() {
            return None;
        }
        Some(Reservation { conn, global })
    }

    /// Sends frames read into `room` (see [`ConnOut::reserve`]): never waits. False once
    /// the connection is gone.
    pub(crate) fn send_reserved(&self, bytes: Bytes, room: Reservation) -> bool {
        if self.tx.is_closed() {
            return false;
        }
        outbox::flush_for(self.id);
        // What the socket does not take keeps its room until written, the rest of a
        // partly written read included: a slow socket holds no unbudgeted bytes.
        let mut room = Some(room);
        let mut queued = |rest: Bytes| match room.take() {
            Some(mut r) => {
                r.trim(rest.len());
                Out::Reserved(rest, r)
            }
            None => Out::Frame(rest, None),
        };
        match self.socket.try_direct(bytes, &self.tx, &mut queued) {
            Ok(()) => true,
            Err(untouched) => self.enqueue(queued(untouched)),
        }
    }

    /// Sends bytes already paid for by `permit` (a temp queue's own budget): never waits;
    /// the permit is returned once they are written. False once the connection is gone.
    pub(crate) fn send_within(&self, bytes: Bytes, permit: OwnedSemaphorePermit) -> bool {
        if self.tx.is_closed() {
            return false;
        }
        let (bytes, permit) = match outbox::gather(self, bytes, Some(permit)) {
            Ok(()) => return true,
            Err((bytes, Some(permit))) => (bytes, permit),
            // `gather` gives back what it was given.
            Err((_, None)) => return false,
        };
        match self
            .socket
            .try_direct(bytes, &self.tx, |rest| Out::Frame(rest, None))
        {
            Ok(()) => true,
            Err(untouched) => self.enqueue(Out::Frame(untouched, Some(permit))),
        }
    }

    /// Sends queue messages (already bounded by prefetch credit). Returns true when they
    /// were written at once and `auto_acks` asked to settle them on write: the caller
    /// settles them.
    pub(crate) fn send_queue_messages(&self, bytes: Bytes, auto_acks: Vec<AutoAck>) -> bool {
        if self.tx.is_closed() {
            return false;
        }
        // Messages settled on write are not gathered: settling can re-enter the queue
        // engine, which may be what is calling here.
        let bytes = if auto_acks.is_empty() {
            match outbox::gather(self, bytes, None) {
                Ok(()) => return false,
                Err((untouched, _)) => untouched,
            }
        } else {
            outbox::flush_for(self.id);
            bytes
        };
        let settle_now = !auto_acks.is_empty();
        let mut acks = Some(auto_acks);
        let res = self.socket.try_direct(bytes, &self.tx, |rest| {
            Out::QueueMessages(rest, acks.take().unwrap_or_default())
        });
        match res {
            // Written whole (`acks` untouched): settle now. Partly: the writer settles.
            Ok(()) => settle_now && acks.is_some(),
            Err(untouched) => {
                self.enqueue(Out::QueueMessages(untouched, acks.unwrap_or_default()));
                false
            }
        }
    }

    /// Sends frames gathered by [`crate::outbox`] with the permits that paid for them:
    /// straight to the socket if possible, else queued. Never waits.
    pub(crate) fn send_gathered(&self, bytes: Bytes, permits: Vec<OwnedSemaphorePermit>) {
        if self.tx.is_closed() || bytes.is_empty() {
            return;
        }
        let mut permits = Some(permits);
        let res = self.socket.try_direct(bytes, &self.tx, |rest| {
            Out::Gathered(rest, permits.take().unwrap_or_default())
        });
        if let Err(untouched) = res {
            self.enqueue(Out::Gathered(untouched, permits.unwrap_or_default()));
        }
    }

    fn enqueue(&self, item: Out) -> bool {
        self.socket.queued.fetch_add(1, Ordering::AcqRel);
        if self.tx.send(item).is_err() {
            self.socket.queued.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        true
    }

    pub(crate) fn close(&self) {
        outbox::flush_for(self.id);
        self.enqueue(Out::Close);
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// Starts the writer task; `dead` turns true when it stops (socket error or Close).
pub(crate) fn spawn(
    id: u64,
    socket: WriteHalf,
    info: Arc<ConnectionInfo>,
    budget_bytes: usize,
    global: GlobalBudget,
) -> (ConnOut, watch::Receiver<bool>, watch::Sender<u64>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let budget_max = budget_bytes.clamp(4096, u32::MAX as usize / 2);
    let budget = Arc::new(Semaphore::new(budget_max));
    let (dead_tx, dead_rx) = watch::channel(false);
    let (hb_tx, hb_rx) = watch::channel(0u64);
    let socket = Arc::new(Socket {
        sock: match socket {
            WriteHalf::Plain(w) => Sink::Plain(w),
            WriteHalf::Tls(w) => Sink::Tls(tokio::sync::Mutex::new(WriteHalf::Tls(w))),
        },
        lock: tokio::sync::Mutex::new(()),
        queued: AtomicUsize::new(0),
        info,
    });
    tokio::spawn(run(socket.clone(), rx, budget.clone(), dead_tx, hb_rx));
    (
        ConnOut {
            id,
            tx,
            budget,
            budget_max,
            global,
            socket,
        },
        dead_rx,
        hb_tx,
    )
}

async fn run(
    socket: Arc<Socket>,
    mut rx: mpsc::UnboundedReceiver<Out>,
    budget: Arc<Semaphore>,
    dead: watch::Sender<bool>,
    mut heartbeat_ms: watch::Receiver<u64>,
) {
    // Allocated when first needed and freed after a large write: an idle or slow
    // connection holds no more than its budgeted frames.
    let mut buf = BytesMut::new();
    let mut permits: Vec<OwnedSemaphorePermit> = Vec::new();
    let mut acks: Vec<AutoAck> = Vec::new();
    let mut closing = false;
    let mut last_write = tokio::time::Instant::now();
    loop {
        let hb = *heartbeat_ms.borrow();
        let first = if hb > 0 {
            let due = last_write + Duration::from_millis(hb);
            match tokio::time::timeout_at(due, rx.recv()).await {
                Ok(item) => item,
                Err(_) => {
                    // Nothing written by anyone for a whole interval: a heart-beat is a
                    // lone end of line (skipped if the fast path is busy writing).
                    // Not between the parts of a partly written frame either.
                    if let Ok(_g) = socket.lock.try_lock() {
                        if socket.queued.load(Ordering::Acquire) == 0
                            && socket.write_all(b"\n").await.is_err()
                        {
                            break;
                        }
                    }
                    last_write = tokio::time::Instant::now();
                    continue;
                }
            }
        } else {
            // Heart-beats are switched on after CONNECT, which may have been written by
            // the fast path without waking this task.
            tokio::select! {
                item = rx.recv() => item,
                changed = heartbeat_ms.changed() => {
                    if changed.is_err() {
                        rx.recv().await
                    } else {
                        last_write = tokio::time::Instant::now();
                        continue;
                    }
                }
            }
        };
        let Some(first) = first else { break };
        let guard = socket.lock.lock().await;
        let mut taken = 0;
        let mut item = Some(first);
        // A lone item is written from its own bytes; several are gathered into `buf`.
        let mut single: Option<Bytes> = None;
        while let Some(it) = item.take() {
            taken += 1;
            let b = match it {
                Out::Frame(b, p) => {
                    permits.extend(p);
                    b
                }
                Out::Reserved(b, r) => {
                    permits.push(r.conn);
                    permits.push(r.global);
                    b
                }
                Out::Gathered(b, p) => {
                    permits.extend(p);
                    b
                }
                Out::QueueMessages(b, ack) => {
                    acks.extend(ack);
                    b
                }
                Out::Close => {
                    closing = true;
                    break;
                }
            };
            match single.take() {
                None if buf.is_empty() => single = Some(b),
                prev => {
                    if let Some(p) = prev {
                        buf.extend_from_slice(&p);
                    }
                    buf.extend_from_slice(&b);
                }
            }
            if buf.len() + single.as_ref().map_or(0, Bytes::len) < MAX_COALESCE {
                item = rx.try_recv().ok();
            }
        }
        let ok = match &single {
            Some(b) => socket.write_all(b).await.is_ok(),
            None => buf.is_empty() || socket.write_all(&buf).await.is_ok(),
        };
        drop(single);
        buf.clear();
        if buf.capacity() > 2 * MAX_COALESCE {
            buf = BytesMut::new();
        }
        socket.queued.fetch_sub(taken, Ordering::AcqRel);
        drop(guard);
        last_write = tokio::time::Instant::now();
        permits.clear();
        settle_auto_acks(&mut acks);
        if !ok {
            break;
        }
        if closing {
            match &socket.sock {
                Sink::Plain(sock) => {
                    let _ = rustix::net::shutdown(sock.as_ref(), rustix::net::Shutdown::Write);
                }
                Sink::Tls(tls) => {
                    // close_notify, then the socket's write side.
                    let _ = tls.lock().await.shutdown().await;
                }
            }
            break;
        }
    }
    budget.close();
    rx.close();
    // Nothing may be written after the close.
    socket.queued.fetch_add(1 << 30, Ordering::AcqRel);
    let _ = dead.send(true);
}

/// Acknowledges written auto-ack messages, one call per run of the same consumer.
fn settle_auto_acks(acks: &mut Vec<AutoAck>) {
    let mut offsets = Vec::new();
    let mut i = 0;
    while i < acks.len() {
        let (q, c, _) = &acks[i];
        offsets.clear();
        let mut j = i;
        while j < acks.len() && Arc::ptr_eq(&acks[j].0, q) && acks[j].1 == *c {
            offsets.push(acks[j].2);
            j += 1;
        }
        q.ack_many(*c, &offsets);
        i = j;
    }
    acks.clear();
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;
    use tokio::net::{TcpListener, TcpStream};

    use super::*;
    use crate::decode::{Decoder, Limits};
    use crate::encode::FrameWriter;
    use crate::frame::{Command, Version};

    /// A writer over one end of a loopback socket, and the other end.
    async fn pair(
        budget: usize,
    ) -> (
        ConnOut,
        watch::Receiver<bool>,
        watch::Sender<u64>,
        TcpStream,
    ) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let peer = TcpStream::connect(listener.local_addr().expect("addr"))
            .await
            .expect("connect");
        let (server, _) = listener.accept().await.expect("accept");
        let (_, wr) = nagare_listener::Stream::from_tcp(server).into_split();
        let info = ConnectionInfo::standalone("stomp", ([127, 0, 0, 1], 1).into());
        let (out, dead, hb) = spawn(7, wr, info, budget, GlobalBudget::new(budget));
        (out, dead, hb, peer)
    }

    fn receipt(sender: usize, seq: usize) -> Bytes {
        let mut buf = BytesMut::new();
        let mut w = FrameWriter::begin(&mut buf, Version::V1_2, Command::Receipt);
        w.header("receipt-id", &format!("{sender}-{seq}"));
        w.body(&[b'x'; 300], true);
        buf.freeze()
    }

    #[tokio::test]
    async fn frames_of_concurrent_senders_arrive_whole_and_in_each_senders_order() {
        const SENDERS: usize = 4;
        const FRAMES: usize = 3000;
        // A small budget and a peer that reads late: the fast path, the queue and waiting
        // for budget are all taken.
        let (out, _dead, _hb, mut peer) = pair(4096).await;
        let senders: Vec<_> = (0..SENDERS)
            .map(|s| {
                let out = out.clone();
                tokio::spawn(async move {
                    for i in 0..FRAMES {
                        assert!(out.send(receipt(s, i)).await);
                    }
                })
            })
            .collect();
        let mut decoder = Decoder::new(Limits::default());
        decoder.version = Version::V1_2;
        let mut buf = BytesMut::new();
        let mut next = [0usize; SENDERS];
        let mut got = 0;
        while got < SENDERS * FRAMES {
            while let Some(f) = decoder.decode(&mut buf).expect("whole frames") {
                let id = f.header("receipt-id").expect("receipt-id");
                let (s, i) = id.split_once('-').expect("s-i");
                let (s, i): (usize, usize) = (s.parse().expect("s"), i.parse().expect("i"));
                assert_eq!(i, next[s], "sender {s} out of order");
                assert_eq!(f.body.len(), 300);
                next[s] += 1;
                got += 1;
            }
            if got == SENDERS * FRAMES {
                break;
            }
            let n = tokio::time::timeout(Duration::from_secs(10), peer.read_buf(&mut buf))
                .await
                .expect("data within 10 s")
                .expect("read");
            assert!(n > 0, "closed early");
        }
        for s in senders {
            s.await.expect("sender");
        }
    }

    fn big_frame() -> Bytes {
        let mut buf = BytesMut::new();
        let mut w = FrameWriter::begin(&mut buf, Version::V1_2, Command::Receipt);
        w.header("receipt-id", "big");
        w.body(&[b'y'; 2 * crate::outbox::MAX_GATHERED_FRAME], true);
        buf.freeze()
    }

    #[tokio::test]
    async fn frames_of_a_reader_batch_are_held_until_its_end_and_stay_in_order() {
        let (out, _dead, _hb, mut peer) = pair(1 << 20).await;
        let mut buf = BytesMut::new();
        crate::outbox::scope(async {
            assert!(out.send(receipt(0, 0)).await);
            assert!(out.send(receipt(0, 1)).await);
            let early =
                tokio::time::timeout(Duration::from_millis(100), peer.read_buf(&mut buf)).await;
            assert!(
                early.is_err(),
                "gathered frames written before the batch ended"
            );
            // Too large to gather: goes out at once, after what was gathered before it.
            assert!(out.send(big_frame()).await);
            assert!(out.send(receipt(0, 2)).await);
        })
        .await;
        let mut want = receipt(0, 0).to_vec();
        want.extend_from_slice(&receipt(0, 1));
        want.extend_from_slice(&big_frame());
        want.extend_from_slice(&receipt(0, 2));
        while buf.len() < want.len() {
            let n = tokio::time::timeout(Duration::from_secs(10), peer.read_buf(&mut buf))
                .await
                .expect("data within 10 s")
                .expect("read");
            assert!(n > 0, "closed early");
        }
        assert!(buf[..] == want[..], "frames reordered or cut");
    }

    #[tokio::test]
    async fn close_writes_what_came_before_then_ends_the_connection() {
        let (out, mut dead, _hb, mut peer) = pair(1 << 20).await;
        assert!(out.send(receipt(0, 0)).await);
        out.close();
        let mut all = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), peer.read_to_end(&mut all))
            .await
            .expect("EOF within 10 s")
            .expect("read");
        assert_eq!(all, receipt(0, 0).to_vec());
        tokio::time::timeout(Duration::from_secs(10), dead.wait_for(|d| *d))
            .await
            .expect("dead within 10 s")
            .expect("watch");
        assert!(out.is_closed());
        assert!(!out.send(receipt(0, 1)).await);
    }
}
