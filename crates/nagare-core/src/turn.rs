//! "Wait one turn" for the appends of pipelined requests, without a trip through the
//! scheduler when the caller can avoid it.
//!
//! The Produce requests of one read wait one turn before appending so that all of them
//! queue first and reach the log in one write (`partition/append.rs`). A turn must not
//! count as a wake-up of the waiting future itself: the sets that poll many futures
//! (`FuturesUnordered`, and `join_all` over many partitions) stop polling the others once
//! two of them wake themselves, so the requests would queue two by two and a later
//! request could append to a partition before an earlier one had queued there (out of
//! sequence for an idempotent producer). So the waker is handed back to the caller:
//!
//! - inside [`collect_deferred`] (the Kafka connection polls its in-flight requests in
//!   rounds within one poll of its task), the wakers are returned to the caller, which
//!   wakes them after the round: no syscall, no other worker woken;
//! - anywhere else, [`yield_turn`] is tokio's `yield_now`, which defers the wake to the
//!   scheduler the same way (the task runs again after the runtime's next look at its
//!   I/O driver).

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

thread_local! {
    /// The wakers deferred during the current [`collect_deferred`] on this thread.
    static DEFERRED: RefCell<Option<Vec<Waker>>> = const { RefCell::new(None) };
}

/// Runs `f` (a round of polls); returns its result and the wakers of the futures that
/// waited a turn during it, for the caller to wake once the round is over.
pub fn collect_deferred<R>(f: impl FnOnce() -> R) -> (R, Vec<Waker>) {
    let outer = DEFERRED.with(|d| d.replace(Some(Vec::new())));
    let result = f();
    let deferred = DEFERRED.with(|d| d.replace(outer)).unwrap_or_default();
    (result, deferred)
}

/// Waits one turn: the future is polled again only after every other future its caller
/// polls in this round has been polled (see the module docs).
pub async fn yield_turn() {
    if DEFERRED.with(|d| d.borrow().is_some()) {
        Deferred { handed: false }.await
    } else {
        tokio::task::yield_now().await
    }
}

/// Hands its waker to the enclosing [`collect_deferred`] on the first poll.
struct Deferred {
    handed: bool,
}

impl Future for Deferred {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.handed {
            return Poll::Ready(());
        }
        self.handed = true;
        let kept = DEFERRED.with(|d| match d.borrow_mut().as_mut() {
            Some(list) => {
                list.push(cx.waker().clone());
                true
            }
            None => false,
        });
        if !kept {
            // Polled outside the round that started it: wake now rather than never.
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    use super::*;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_turn_inside_a_round_hands_its_waker_to_the_round() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let mut turn = Box::pin(yield_turn());
        let (first, deferred) = collect_deferred(|| turn.as_mut().poll(&mut cx));
        assert!(first.is_pending());
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            0,
            "not woken during the round"
        );
        assert_eq!(deferred.len(), 1);
        deferred.into_iter().for_each(Waker::wake);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        let (second, deferred) = collect_deferred(|| turn.as_mut().poll(&mut cx));
        assert!(second.is_ready());
        assert!(deferred.is_empty());
    }

    #[tokio::test]
    async fn a_turn_outside_a_round_is_a_scheduler_yield() {
        yield_turn().await;
        let ((), deferred) = collect_deferred(|| ());
        assert!(deferred.is_empty());
    }
}
