//! Waiting for a future on a thread that may block. The admin client's requests are
//! futures completed by librdkafka's own thread; the core's catalog calls are blocking
//! (made off the runtime's workers), so they wait here with the thread parked, needing
//! no runtime.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `fut` to completion on this thread. Only for futures something else completes
/// (another thread), bounded by their own timeouts.
pub(crate) fn wait<F: Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        // A spurious wake-up only polls again.
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn waits_for_another_thread() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            let _ = tx.send(7);
        });
        assert_eq!(super::wait(rx).ok(), Some(7));
    }
}
