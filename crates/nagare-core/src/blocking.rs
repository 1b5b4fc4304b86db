//! How a synchronous core method that may wait for the disk keeps a runtime worker
//! thread free (see "What may block, and where" in the crate docs).

use tokio::runtime::{Handle, RuntimeFlavor};

/// Runs `f`, which may block on the disk. Called on a worker thread of a multi-threaded
/// tokio runtime, the worker first hands its other tasks to another thread
/// (`block_in_place`), so connections served there do not stall; anywhere else (the
/// blocking pool, a plain thread, a single-threaded test runtime) `f` simply runs.
pub(crate) fn off_runtime<T>(f: impl FnOnce() -> T) -> T {
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

#[cfg(test)]
mod tests {
    use super::off_runtime;

    #[test]
    fn runs_on_every_kind_of_thread() {
        assert_eq!(off_runtime(|| 1), 1);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        rt.block_on(async {
            assert_eq!(off_runtime(|| 2), 2);
            let on_worker = tokio::spawn(async { off_runtime(|| 3) });
            assert_eq!(on_worker.await.unwrap(), 3);
            let on_pool = tokio::task::spawn_blocking(|| off_runtime(|| 4));
            assert_eq!(on_pool.await.unwrap(), 4);
        });
        let single = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        single.block_on(async { assert_eq!(off_runtime(|| 5), 5) });
    }
}
