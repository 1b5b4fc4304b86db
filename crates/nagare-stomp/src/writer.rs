//! The writing half of a connection: one task drains a channel of encoded frames and
//! writes everything that is waiting with one write call (coalescing), sends heart-beats
//! when idle, and settles auto-acked queue messages once they are written.
//!
//! Producers are bounded: the connection's own replies, topic and temp-queue messages
//! take permits from a byte budget returned after the write; queue messages are bounded
//! by their subscription's prefetch instead. Because this task never waits for anything
//! but the socket, no cycle of full buffers between connections can deadlock.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use nagare_core::queues::{ConsumerId, Queue};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};

/// Stop gathering more frames into one write beyond this many bytes.
const MAX_COALESCE: usize = 256 * 1024;

pub(crate) enum Out {
    Frame(Bytes, Option<OwnedSemaphorePermit>),
    /// A queue message; `Some` acknowledges it once written (ack mode `auto`).
    QueueMessage(Bytes, Option<(Arc<Queue>, ConsumerId, i64)>),
    /// Write what came before, then close the socket.
    Close,
}

/// A handle to a connection's writer, cloned into everything that sends to it.
#[derive(Clone)]
pub(crate) struct ConnOut {
    pub id: u64,
    tx: mpsc::UnboundedSender<Out>,
    budget: Arc<Semaphore>,
    budget_max: usize,
}

impl ConnOut {
    /// Queues bytes (one or more frames), waiting for room in the budget. False once the
    /// connection is gone.
    pub async fn send(&self, bytes: Bytes) -> bool {
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
        self.tx.send(Out::Frame(bytes, Some(permit))).is_ok()
    }

    /// Queues a queue message (already bounded by prefetch credit).
    pub fn send_queue_message(
        &self,
        bytes: Bytes,
        auto_ack: Option<(Arc<Queue>, ConsumerId, i64)>,
    ) {
        let _ = self.tx.send(Out::QueueMessage(bytes, auto_ack));
    }

    pub fn close(&self) {
        let _ = self.tx.send(Out::Close);
    }

    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// Starts the writer task; `dead` turns true when it stops (socket error or Close).
pub(crate) fn spawn(
    id: u64,
    socket: OwnedWriteHalf,
    budget_bytes: usize,
) -> (ConnOut, watch::Receiver<bool>, watch::Sender<u64>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let budget_max = budget_bytes.clamp(4096, u32::MAX as usize / 2);
    let budget = Arc::new(Semaphore::new(budget_max));
    let (dead_tx, dead_rx) = watch::channel(false);
    let (hb_tx, hb_rx) = watch::channel(0u64);
    tokio::spawn(run(socket, rx, budget.clone(), dead_tx, hb_rx));
    (
        ConnOut {
            id,
            tx,
            budget,
            budget_max,
        },
        dead_rx,
        hb_tx,
    )
}

async fn run(
    mut socket: OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Out>,
    budget: Arc<Semaphore>,
    dead: watch::Sender<bool>,
    heartbeat_ms: watch::Receiver<u64>,
) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut permits: Vec<OwnedSemaphorePermit> = Vec::new();
    let mut acks: Vec<(Arc<Queue>, ConsumerId, i64)> = Vec::new();
    let mut closing = false;
    loop {
        let hb = *heartbeat_ms.borrow();
        let first = if hb > 0 {
            match tokio::time::timeout(Duration::from_millis(hb), rx.recv()).await {
                Ok(item) => item,
                Err(_) => {
                    // Idle for a whole interval: a heart-beat is a lone end of line.
                    if socket.write_all(b"\n").await.is_err() {
                        break;
                    }
                    continue;
                }
            }
        } else {
            rx.recv().await
        };
        let Some(first) = first else { break };
        let mut item = Some(first);
        while let Some(it) = item.take() {
            match it {
                Out::Frame(b, p) => {
                    buf.extend_from_slice(&b);
                    permits.extend(p);
                }
                Out::QueueMessage(b, ack) => {
                    buf.extend_from_slice(&b);
                    acks.extend(ack);
                }
                Out::Close => {
                    closing = true;
                    break;
                }
            }
            if buf.len() < MAX_COALESCE {
                item = rx.try_recv().ok();
            }
        }
        if !buf.is_empty() {
            if socket.write_all(&buf).await.is_err() {
                break;
            }
            buf.clear();
        }
        permits.clear();
        settle_auto_acks(&mut acks);
        if closing {
            let _ = socket.shutdown().await;
            break;
        }
    }
    budget.close();
    rx.close();
    let _ = dead.send(true);
}

/// Acknowledges written auto-ack messages, one call per run of the same consumer.
fn settle_auto_acks(acks: &mut Vec<(Arc<Queue>, ConsumerId, i64)>) {
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
