//! Write coalescing across one batch of inbound frames.
//!
//! A connection's reader runs every complete frame of one read in a row ([`scope`]).
//! Frames those produce — RECEIPTs to the reader's own client, replies to temp queues
//! of other connections, queue MESSAGEs dispatched on the way — are gathered here per
//! destination connection and handed to each one's writer as one piece when the batch
//! ends: one socket write per destination and batch instead of one per frame (a
//! pipelining RPC responder's 100 replies to one requester become one `sendto`).
//!
//! The outbox lives in a task-local of the reader task, so the senders it gathers for
//! (`ConnOut`'s methods, called deep inside handlers and the queue engine) need no
//! extra argument; in any other task nothing is gathered and they write as before.
//!
//! Order: what one task sends to one connection stays in order — a frame that is not
//! gathered (too large, no room in the budget, a log read) first flushes what is
//! gathered for its connection. Latency: the reader flushes before it waits on
//! anything slow (an append, see `dispatch`) and after frames that start deliveries
//! by other tasks (CONNECT, SUBSCRIBE), so a gathered frame never waits on the disk.
//! Memory: at most [`MAX_ENTRY`] bytes per destination and [`MAX_TOTAL`] in all, each
//! gathered frame still holding its budget permit until written.

use std::cell::RefCell;
use std::future::Future;

use bytes::{Bytes, BytesMut};
use tokio::sync::OwnedSemaphorePermit;

use crate::writer::ConnOut;

/// Gathered bytes for one destination beyond which they are handed over at once.
const MAX_ENTRY: usize = 64 * 1024;
/// Bytes first allocated for a destination's gathered frames.
const ENTRY_START: usize = 8 * 1024;
/// Gathered bytes in all beyond which everything is handed over.
const MAX_TOTAL: usize = 256 * 1024;
/// Frames at least this large are not copied: they go out on their own (after what was
/// gathered for the same connection).
pub(crate) const MAX_GATHERED_FRAME: usize = 16 * 1024;

tokio::task_local! {
    static OUTBOX: RefCell<Outbox>;
}

#[derive(Default)]
struct Outbox {
    entries: Vec<Entry>,
    bytes: usize,
    /// False while gathered bytes are being handed over: the writes can make the queue
    /// engine dispatch more (which then goes out directly, not into a half-taken box).
    closed: bool,
}

/// What is gathered for one destination connection.
struct Entry {
    out: ConnOut,
    buf: BytesMut,
    /// Budget permits of the gathered frames, returned once they are written.
    permits: Vec<OwnedSemaphorePermit>,
}

/// Runs `f` (a batch of inbound frames) gathering its outbound frames, then hands them
/// over: one piece per destination.
pub(crate) async fn scope<F: Future>(f: F) -> F::Output {
    OUTBOX
        .scope(RefCell::new(Outbox::default()), async {
            let r = f.await;
            flush();
            r
        })
        .await
}

/// Gathers `bytes` for `out` (with the permit that pays for them, if any). Gives them
/// back when nothing is gathered here — outside a batch, or a large frame — after
/// handing over what was gathered for `out`, so the caller can send them in order.
pub(crate) fn gather(
    out: &ConnOut,
    bytes: Bytes,
    permit: Option<OwnedSemaphorePermit>,
) -> Result<(), (Bytes, Option<OwnedSemaphorePermit>)> {
    let mut give_back = Some((bytes, permit));
    let mut full = false;
    let gathered = OUTBOX.try_with(|o| {
        let Ok(mut o) = o.try_borrow_mut() else {
            return;
        };
        if o.closed {
            return;
        }
        let Some((bytes, permit)) = give_back.take() else {
            return;
        };
        if bytes.len() >= MAX_GATHERED_FRAME {
            give_back = Some((bytes, permit));
            return;
        }
        let len = bytes.len();
        let i = match o.entries.iter().position(|e| e.out.id == out.id) {
            Some(i) => i,
            None => {
                o.entries.push(Entry {
                    out: out.clone(),
                    // Room for a few dozen small frames without growing (and copying).
                    buf: BytesMut::with_capacity(ENTRY_START),
                    permits: Vec::new(),
                });
                o.entries.len() - 1
            }
        };
        let e = &mut o.entries[i];
        e.buf.extend_from_slice(&bytes);
        e.permits.extend(permit);
        full = e.buf.len() >= MAX_ENTRY;
        o.bytes += len;
        full |= o.bytes >= MAX_TOTAL;
    });
    if gathered.is_err() {
        // Not inside a batch: nothing can be gathered for anyone.
        return match give_back {
            Some(b) => Err(b),
            None => Ok(()),
        };
    }
    match give_back {
        Some(b) => {
            flush_for(out.id);
            Err(b)
        }
        None => {
            if full {
                flush();
            }
            Ok(())
        }
    }
}

/// True inside a reader's batch (its frames may be gathered).
pub(crate) fn active() -> bool {
    OUTBOX
        .try_with(|o| o.try_borrow().is_ok_and(|o| !o.closed))
        .unwrap_or(false)
}

/// Hands over everything gathered so far (no-op outside a batch).
pub(crate) fn flush() {
    hand_over(|_| true);
}

/// Hands over what is gathered for connection `id`, so a frame sent to it another way
/// comes after it.
pub(crate) fn flush_for(id: u64) {
    hand_over(|e| e.out.id == id);
}

fn hand_over(which: impl Fn(&Entry) -> bool) {
    let taken = OUTBOX.try_with(|o| {
        let Ok(mut o) = o.try_borrow_mut() else {
            return Vec::new();
        };
        let mut taken = Vec::new();
        let mut i = 0;
        while i < o.entries.len() {
            if which(&o.entries[i]) {
                let e = o.entries.swap_remove(i);
                o.bytes = o.bytes.saturating_sub(e.buf.len());
                taken.push(e);
            } else {
                i += 1;
            }
        }
        if !taken.is_empty() {
            o.closed = true;
        }
        taken
    });
    let Ok(taken) = taken else { return };
    if taken.is_empty() {
        return;
    }
    for e in taken {
        e.out.send_gathered(e.buf.freeze(), e.permits);
    }
    let _ = OUTBOX.try_with(|o| {
        if let Ok(mut o) = o.try_borrow_mut() {
            o.closed = false;
        }
    });
}
