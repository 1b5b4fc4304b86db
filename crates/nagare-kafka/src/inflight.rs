//! The requests a connection has started, answered in order: a `FuturesOrdered` that
//! does not wake its own task for what it can finish in the same poll.
//!
//! Why not `FuturesOrdered`: the pipelined Produce requests of one read wait one turn so
//! that they reach the log in one write (`Partition::append_batches_together`). Under
//! `FuturesOrdered` that turn was tokio's `yield_now`, and tokio answers it by looking
//! for other work, polling its I/O driver and waking an idle worker thread: on the 100 B
//! produce path that was two or three of the five syscalls per read of requests (an
//! eventfd write or futex wake, the other worker's epoll_wait, the yielding worker's own
//! epoll_wait). Here the set polls in rounds within one poll of the task: a request
//! waiting a turn hands its waker to the round (`nagare_core::turn`) and is polled again
//! in the next round; a request that wakes itself while the set is polling is marked and
//! polled again too, a few rounds at most. Only wakes from elsewhere (an fsync finished
//! on the blocking pool, a fetch's data arriving) wake the task.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// Rounds of polling within one poll of the set: a request that waits one turn needs two.
/// A request still waking itself after that (tokio's cooperative budget spent) waits for
/// the task's next turn, as it would anywhere else.
const ROUNDS: usize = 4;

/// What every request's waker shares with the set.
#[derive(Default)]
struct Shared {
    /// True while the set polls its requests: a wake then only marks the request.
    polling: AtomicBool,
    /// The connection's task.
    task: AtomicWaker,
}

/// One request's waker.
struct Flag {
    woken: AtomicBool,
    shared: Arc<Shared>,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, SeqCst);
        // Paired with `poll_next`, which clears `polling` before it looks at the flags
        // again: one of the two sees the other's store.
        if !self.shared.polling.load(SeqCst) {
            self.shared.task.wake();
        }
    }
}

struct Slot<F: Future> {
    future: Option<F>,
    output: Option<F::Output>,
    flag: Arc<Flag>,
    /// `flag` as a waker, made once: making it per poll would clone the `Arc` each time.
    waker: Waker,
}

/// Started requests in the order they came; their answers come out in that order.
pub(crate) struct Inflight<F: Future + Unpin> {
    slots: VecDeque<Slot<F>>,
    shared: Arc<Shared>,
}

impl<F: Future + Unpin> Default for Inflight<F> {
    fn default() -> Self {
        Inflight {
            slots: VecDeque::new(),
            shared: Arc::default(),
        }
    }
}

impl<F: Future + Unpin> Inflight<F> {
    pub(crate) fn push_back(&mut self, future: F) {
        let flag = Arc::new(Flag {
            // A new request is polled on the set's next poll.
            woken: AtomicBool::new(true),
            shared: self.shared.clone(),
        });
        self.slots.push_back(Slot {
            future: Some(future),
            output: None,
            waker: Waker::from(flag.clone()),
            flag,
        });
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The oldest request's answer once it is done (`None` when nothing is in flight).
    pub(crate) async fn next(&mut self) -> Option<F::Output> {
        std::future::poll_fn(|cx| self.poll_next(cx)).await
    }

    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<F::Output>> {
        if self.slots.is_empty() {
            return Poll::Ready(None);
        }
        self.shared.task.register(cx.waker());
        self.shared.polling.store(true, SeqCst);
        for _ in 0..ROUNDS {
            if !self.poll_woken() {
                break;
            }
        }
        self.shared.polling.store(false, SeqCst);
        if self.slots.iter().any(|s| s.flag.woken.load(SeqCst)) {
            // Woken after its last poll (or still waking itself): poll again next turn.
            cx.waker().wake_by_ref();
        }
        match self.slots.front_mut().and_then(|s| s.output.take()) {
            Some(output) => {
                self.slots.pop_front();
                Poll::Ready(Some(output))
            }
            None => Poll::Pending,
        }
    }

    /// Polls every request whose flag is up, oldest first, then wakes (marks) those that
    /// waited a turn during it; whether any was polled.
    fn poll_woken(&mut self) -> bool {
        let (polled, deferred) = nagare_core::turn::collect_deferred(|| self.poll_round());
        deferred.into_iter().for_each(Waker::wake);
        polled
    }

    fn poll_round(&mut self) -> bool {
        let mut polled = false;
        for slot in self.slots.iter_mut() {
            if !slot.flag.woken.swap(false, SeqCst) {
                continue;
            }
            let Some(future) = slot.future.as_mut() else {
                continue;
            };
            polled = true;
            let mut cx = Context::from_waker(&slot.waker);
            if let Poll::Ready(output) = Pin::new(future).poll(&mut cx) {
                slot.output = Some(output);
                slot.future = None;
            }
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// Counts the wakes of the task polling the set.
    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    /// Wakes itself `turns` times before it is ready, as a request waiting one turn does.
    fn yielding(turns: usize, value: u32) -> impl Future<Output = u32> + Unpin {
        let mut left = turns;
        std::future::poll_fn(move |cx| {
            if left == 0 {
                return Poll::Ready(value);
            }
            left -= 1;
            cx.waker().wake_by_ref();
            Poll::Pending
        })
    }

    /// The polling task's waker and its wake counter.
    fn task_waker() -> (Arc<CountingWaker>, Waker) {
        let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = Waker::from(counter.clone());
        (counter, waker)
    }

    fn poll_once<F: Future + Unpin>(
        set: &mut Inflight<F>,
        waker: &Waker,
    ) -> Poll<Option<F::Output>> {
        set.poll_next(&mut Context::from_waker(waker))
    }

    #[test]
    fn requests_waiting_a_turn_finish_in_one_poll_without_waking_the_task() {
        let (counter, waker) = task_waker();
        let mut set = Inflight::default();
        for v in 0..3 {
            set.push_back(yielding(1, v));
        }
        assert_eq!(poll_once(&mut set, &waker), Poll::Ready(Some(0)));
        assert_eq!(poll_once(&mut set, &waker), Poll::Ready(Some(1)));
        assert_eq!(poll_once(&mut set, &waker), Poll::Ready(Some(2)));
        assert_eq!(poll_once(&mut set, &waker), Poll::Ready(None));
        assert_eq!(counter.0.load(SeqCst), 0, "the task was never woken");
    }

    #[test]
    fn requests_waiting_a_turn_all_start_before_any_resumes() {
        // Each request records when it starts and resumes: every start comes first, as
        // every Produce request of one read must queue before any appends.
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (counter, waker) = task_waker();
        let mut set = Inflight::default();
        for i in 0..3 {
            let log = log.clone();
            set.push_back(Box::pin(async move {
                log.lock().expect("log").push(format!("start {i}"));
                nagare_core::turn::yield_turn().await;
                log.lock().expect("log").push(format!("resume {i}"));
                i
            }) as Pin<Box<dyn Future<Output = i32>>>);
        }
        assert_eq!(poll_once(&mut set, &waker), Poll::Ready(Some(0)));
        assert_eq!(
            *log.lock().expect("log"),
            ["start 0", "start 1", "start 2", "resume 0", "resume 1", "resume 2"]
        );
        assert_eq!(poll_once(&mut set, &waker), Poll::Ready(Some(1)));
        assert_eq!(poll_once(&mut set, &waker), Poll::Ready(Some(2)));
        assert_eq!(counter.0.load(SeqCst), 0, "the task was never woken");
    }

    #[test]
    fn answers_come_out_in_request_order() {
        let (_, waker) = task_waker();
        let mut set = Inflight::default();
        // The first request is done last: nothing comes out before it.
        set.push_back(Box::pin(yielding(2, 10)) as Pin<Box<dyn Future<Output = u32>>>);
        set.push_back(Box::pin(yielding(0, 11)));
        assert_eq!(poll_once(&mut set, &waker), Poll::Ready(Some(10)));
        assert_eq!(poll_once(&mut set, &waker), Poll::Ready(Some(11)));
    }

    #[test]
    fn a_request_that_keeps_waking_itself_waits_for_the_next_turn() {
        let (counter, waker) = task_waker();
        let mut set = Inflight::default();
        set.push_back(yielding(ROUNDS + 1, 7));
        assert_eq!(poll_once(&mut set, &waker), Poll::Pending);
        assert_eq!(counter.0.load(SeqCst), 1, "woken for its next turn");
        assert_eq!(poll_once(&mut set, &waker), Poll::Ready(Some(7)));
    }

    #[test]
    fn a_wake_from_elsewhere_wakes_the_task() {
        let (counter, waker) = task_waker();
        let mut set = Inflight::default();
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        set.push_back(Box::pin(async move { rx.await.unwrap_or(0) }));
        assert_eq!(poll_once(&mut set, &waker), Poll::Pending);
        assert_eq!(counter.0.load(SeqCst), 0);
        std::thread::spawn(move || tx.send(5))
            .join()
            .expect("sender thread")
            .expect("receiver alive");
        assert_eq!(counter.0.load(SeqCst), 1);
        assert_eq!(poll_once(&mut set, &waker), Poll::Ready(Some(5)));
    }
}
