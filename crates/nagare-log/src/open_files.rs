//! File descriptors are a budget shared by every log in the process, not one per segment
//! forever: a segment opens its file when it is used and the least recently used open
//! files are closed when the budget is reached, so 10,000 partitions run under
//! `ulimit -n 1024`.
//!
//! Recency is tracked with the CLOCK approximation of LRU (a referenced bit per file and a
//! sweeping hand) so the hot path (a file that is already open) takes only its own lock.
//! A [`File`] handed out (an `Arc`, e.g. inside a `FileSlice` being sent) keeps its
//! descriptor open until it is dropped, even if the budget has evicted it meanwhile, so
//! every slice holds a [`Lent`] permit counted against the same budget: a fetch over
//! thousands of partitions gets copies instead of slices once the budget is used up,
//! rather than running the process out of descriptors.
//! When the system refuses to open a file (EMFILE/ENFILE), one more file is evicted and the
//! open retried; if nothing is left to evict, that one call fails.

use std::collections::VecDeque;
use std::fmt;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;

use crate::storage::{OpenMode, Storage};

/// The open-file budget shared by the logs that hold this handle.
#[derive(Clone)]
pub struct OpenFiles(Arc<Shared>);

struct Shared {
    budget: AtomicUsize,
    /// Files currently held open by slots.
    open: AtomicUsize,
    /// Files lent out to readers (each may also be one of the `open` ones; counting it
    /// twice only errs on the safe side).
    lent: AtomicUsize,
    /// Slots holding an open file, in CLOCK order (may hold stale entries).
    ring: Mutex<VecDeque<Weak<SlotInner>>>,
}

impl OpenFiles {
    /// A budget of at most `budget` open segment files (at least 1).
    pub fn new(budget: usize) -> OpenFiles {
        OpenFiles(Arc::new(Shared {
            budget: AtomicUsize::new(budget.max(1)),
            open: AtomicUsize::new(0),
            lent: AtomicUsize::new(0),
            ring: Mutex::new(VecDeque::new()),
        }))
    }

    /// The process-wide budget every log uses unless its config names another; starts at
    /// [`default_budget`].
    pub fn global() -> OpenFiles {
        static GLOBAL: OnceLock<OpenFiles> = OnceLock::new();
        GLOBAL
            .get_or_init(|| OpenFiles::new(default_budget()))
            .clone()
    }

    /// Changes the budget; files above it are closed as others are opened.
    pub fn set_budget(&self, budget: usize) {
        self.0.budget.store(budget.max(1), Ordering::Relaxed);
    }

    pub fn budget(&self) -> usize {
        self.0.budget.load(Ordering::Relaxed)
    }

    /// Segment files open right now (not counting ones only held by readers).
    pub fn open_count(&self) -> usize {
        self.0.open.load(Ordering::Relaxed)
    }

    /// Files lent out to readers right now.
    pub fn lent_count(&self) -> usize {
        self.0.lent.load(Ordering::Relaxed)
    }

    /// A permit to keep one more descriptor alive outside the slots (a file handed to a
    /// reader), closing least recently used files to make room; `None` when the budget
    /// is taken by other lent files.
    pub(crate) fn lend(&self) -> Option<Lent> {
        let shared = &self.0;
        // One descriptor always stays for a slot, so a reader can still open the file it
        // copies from without going over the budget.
        if shared.lent.load(Ordering::Relaxed) + 1 >= shared.budget.load(Ordering::Relaxed) {
            return None;
        }
        let mut ring = shared.ring.lock();
        while shared.used() >= shared.budget.load(Ordering::Relaxed) {
            if !evict_one(shared, &mut ring) {
                return None;
            }
        }
        shared.lent.fetch_add(1, Ordering::Relaxed);
        Some(Lent(shared.clone()))
    }

    /// A lazily opened file at `path`.
    pub(crate) fn slot(&self, storage: &Storage, path: PathBuf, mode: OpenMode) -> FileSlot {
        FileSlot(Arc::new(SlotInner {
            shared: self.0.clone(),
            storage: storage.clone(),
            path,
            mode,
            file: Mutex::new(None),
            referenced: AtomicBool::new(false),
        }))
    }

    /// Opens a short-lived file (an index being written, a directory being synced),
    /// evicting cached files when the system is out of descriptors.
    pub(crate) fn open_transient(
        &self,
        storage: &Storage,
        path: &Path,
        mode: OpenMode,
    ) -> io::Result<File> {
        loop {
            match storage.open(path, mode) {
                Err(e) if is_out_of_descriptors(&e) => {
                    if !evict_one(&self.0, &mut self.0.ring.lock()) {
                        return Err(e);
                    }
                }
                other => return other,
            }
        }
    }

    /// Runs `op` (which opens a descriptor, e.g. a directory fsync), evicting cached
    /// files and retrying when the system is out of descriptors.
    pub(crate) fn retry_out_of_descriptors<T>(
        &self,
        mut op: impl FnMut() -> io::Result<T>,
    ) -> io::Result<T> {
        loop {
            match op() {
                Err(e) if is_out_of_descriptors(&e) => {
                    if !evict_one(&self.0, &mut self.0.ring.lock()) {
                        return Err(e);
                    }
                }
                other => return other,
            }
        }
    }
}

impl Default for OpenFiles {
    fn default() -> Self {
        OpenFiles::global()
    }
}

impl fmt::Debug for OpenFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenFiles")
            .field("budget", &self.budget())
            .field("open", &self.open_count())
            .finish()
    }
}

impl Shared {
    /// Descriptors counted against the budget: cached in slots plus lent to readers.
    fn used(&self) -> usize {
        self.open.load(Ordering::Relaxed) + self.lent.load(Ordering::Relaxed)
    }
}

/// One descriptor lent to a reader, given back to the budget when dropped.
pub(crate) struct Lent(Arc<Shared>);

impl Drop for Lent {
    fn drop(&mut self) {
        self.0.lent.fetch_sub(1, Ordering::Relaxed);
    }
}

impl fmt::Debug for Lent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Lent")
    }
}

/// Half the soft `RLIMIT_NOFILE`, leaving the other half for sockets and everything else.
pub fn default_budget() -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(1 << 20);
    (limit / 2).clamp(16, 1 << 20) as usize
}

fn is_out_of_descriptors(e: &io::Error) -> bool {
    let code = e.raw_os_error();
    code == Some(rustix::io::Errno::MFILE.raw_os_error())
        || code == Some(rustix::io::Errno::NFILE.raw_os_error())
}

/// Closes the least recently used open file (second chance for referenced ones);
/// false when nothing is open.
fn evict_one(shared: &Shared, ring: &mut VecDeque<Weak<SlotInner>>) -> bool {
    // Two sweeps at most: the first may only clear referenced bits.
    let mut budget = ring.len() * 2 + 1;
    while budget > 0 {
        budget -= 1;
        let Some(weak) = ring.pop_front() else {
            return false;
        };
        let Some(slot) = weak.upgrade() else {
            continue;
        };
        if slot.referenced.swap(false, Ordering::Relaxed) {
            ring.push_back(weak);
            continue;
        }
        // A slot being opened holds its own lock only briefly and never waits for the
        // ring, so this cannot deadlock; skip it rather than wait anyway.
        let Some(mut file) = slot.file.try_lock() else {
            ring.push_back(weak);
            continue;
        };
        if file.take().is_some() {
            shared.open.fetch_sub(1, Ordering::Relaxed);
            return true;
        }
    }
    false
}

/// One lazily opened file, closed when the budget needs its descriptor.
pub(crate) struct FileSlot(Arc<SlotInner>);

struct SlotInner {
    shared: Arc<Shared>,
    storage: Storage,
    path: PathBuf,
    mode: OpenMode,
    file: Mutex<Option<Arc<File>>>,
    referenced: AtomicBool,
}

impl FileSlot {
    /// The open file, opening it (and closing others past the budget) if needed.
    pub(crate) fn get(&self) -> io::Result<Arc<File>> {
        let inner = &self.0;
        if let Some(f) = &*inner.file.lock() {
            inner.referenced.store(true, Ordering::Relaxed);
            return Ok(f.clone());
        }
        let shared = &inner.shared;
        let mut ring = shared.ring.lock();
        if let Some(f) = &*inner.file.lock() {
            return Ok(f.clone());
        }
        while shared.used() >= shared.budget.load(Ordering::Relaxed) {
            if !evict_one(shared, &mut ring) {
                break;
            }
        }
        let file = loop {
            match inner.storage.open(&inner.path, inner.mode) {
                Ok(f) => break Arc::new(f),
                Err(e) if is_out_of_descriptors(&e) => {
                    if !evict_one(shared, &mut ring) {
                        return Err(e);
                    }
                }
                Err(e) => return Err(e),
            }
        };
        self.install(&mut ring, file.clone());
        Ok(file)
    }

    /// Adopts a file just opened by the caller (e.g. a segment it created).
    pub(crate) fn insert(&self, file: File) -> Arc<File> {
        let file = Arc::new(file);
        let shared = &self.0.shared;
        let mut ring = shared.ring.lock();
        while shared.used() >= shared.budget.load(Ordering::Relaxed) {
            if !evict_one(shared, &mut ring) {
                break;
            }
        }
        self.install(&mut ring, file.clone());
        file
    }

    fn install(&self, ring: &mut VecDeque<Weak<SlotInner>>, file: Arc<File>) {
        let inner = &self.0;
        if inner.file.lock().replace(file).is_none() {
            inner.shared.open.fetch_add(1, Ordering::Relaxed);
        }
        inner.referenced.store(false, Ordering::Relaxed);
        ring.push_back(Arc::downgrade(inner));
    }

    /// The file if it is open now, without opening it.
    #[cfg(test)]
    pub(crate) fn if_open(&self) -> Option<Arc<File>> {
        self.0.file.lock().clone()
    }

    /// Closes the descriptor held by the slot (readers keep theirs).
    pub(crate) fn close(&self) {
        if self.0.file.lock().take().is_some() {
            self.0.shared.open.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for SlotInner {
    fn drop(&mut self) {
        if self.file.get_mut().take().is_some() {
            self.shared.open.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_closes_least_recently_used_files() {
        let dir = tempfile::tempdir().unwrap();
        let files = OpenFiles::new(3);
        let storage = Storage::real();
        let slots: Vec<FileSlot> = (0..5)
            .map(|i| {
                let p = dir.path().join(format!("f{i}"));
                std::fs::write(&p, [i as u8]).unwrap();
                files.slot(&storage, p, OpenMode::Read)
            })
            .collect();
        for s in &slots {
            s.get().unwrap();
            assert!(files.open_count() <= 3);
        }
        assert_eq!(files.open_count(), 3);
        // The most recent ones are open; the first two were evicted.
        assert!(slots[0].if_open().is_none() && slots[1].if_open().is_none());
        assert!(slots[4].if_open().is_some());
        // Touch 2 so it gets a second chance; opening 0 evicts 3.
        slots[2].get().unwrap();
        slots[0].get().unwrap();
        assert!(slots[2].if_open().is_some());
        assert!(slots[3].if_open().is_none());
        drop(slots);
        assert_eq!(files.open_count(), 0);
    }
}
