//! A simulated disk for tests: a [`FileSystem`] that models a power cut and injects
//! full-disk and I/O errors, deterministically from a seed.
//!
//! What it models:
//! - Files live in a real directory (so readers, `pread` and `sendfile` work unchanged)
//!   and the simulator records every change made through it since the last durability
//!   point: data writes and length changes per file, and creations, renames and removals
//!   per directory.
//! - A file's changes become durable when an fsync of that file completes; a directory's
//!   entries (new, renamed and removed names) only when that directory is fsynced. An
//!   fsync of a file does not make its name durable.
//! - [`SimFs::power_cut`] replaces the directory with a state the disk could hold after
//!   losing power: the durable state plus a random subset of the later changes, applied
//!   in order, each write possibly torn (only a prefix kept). Dropping an earlier change
//!   while keeping a later one models reordering; a kept write past a lost one leaves
//!   zeros in between, as a file system that allocated but never wrote the block would.
//! - A failed fsync (injected) makes a random part of the file's pending changes durable
//!   and forgets the rest for good, as Linux does when it marks pages clean after a
//!   write-back error: a later successful fsync does not bring them back unless they are
//!   written again.
//! - A full disk (injected) fails writes with `ENOSPC` after writing a random prefix, and
//!   refuses to create files.
//!
//! What it does not model: directories other than the files inside them (a directory
//! created through it is durable at once), crashes of the simulator's own bookkeeping,
//! and other processes using the same files. Every file opened through it must be closed
//! (every log using it dropped) before [`SimFs::power_cut`].

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::storage::{FileSystem, OpenMode, RealFs, Storage};

/// The simulated disk; share it as `Arc<SimFs>` and hand [`SimFs::storage`] to the logs.
pub struct SimFs {
    state: Mutex<State>,
}

struct State {
    rng: u64,
    next_inode: u64,
    /// Open descriptors made through the simulator, by number, to their inode.
    fds: HashMap<RawFd, u64>,
    inodes: BTreeMap<u64, Inode>,
    dirs: BTreeMap<PathBuf, Dir>,
    disk_full: bool,
    failing_syncs: u32,
    failing_writes: u32,
}

#[derive(Default)]
struct Inode {
    durable: Vec<u8>,
    pending: Vec<FileOp>,
}

enum FileOp {
    Write { pos: u64, data: Vec<u8> },
    SetLen(u64),
}

#[derive(Default)]
struct Dir {
    durable: BTreeMap<String, u64>,
    current: BTreeMap<String, u64>,
    pending: Vec<DirOp>,
}

enum DirOp {
    Link(String, u64),
    Unlink(String),
    Rename(String, String),
}

fn errno(e: rustix::io::Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

fn split(path: &Path) -> io::Result<(PathBuf, String)> {
    let dir = path.parent().unwrap_or(Path::new("")).to_path_buf();
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file path"))?;
    Ok((dir, name.to_string()))
}

impl State {
    /// splitmix64: small, fast and fully determined by the seed.
    fn next(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    /// The directory's bookkeeping; a directory seen for the first time is adopted as
    /// it is on disk, all durable.
    fn dir(&mut self, dir: &Path) -> io::Result<&mut Dir> {
        if !self.dirs.contains_key(dir) {
            let mut d = Dir::default();
            if dir.is_dir() {
                for name in RealFs.list_dir(dir)? {
                    let path = dir.join(&name);
                    if !path.is_file() {
                        continue;
                    }
                    let ino = self.next_inode;
                    self.next_inode += 1;
                    let durable = std::fs::read(&path)?;
                    self.inodes.insert(
                        ino,
                        Inode {
                            durable,
                            pending: Vec::new(),
                        },
                    );
                    d.durable.insert(name.clone(), ino);
                    d.current.insert(name, ino);
                }
            }
            self.dirs.insert(dir.to_path_buf(), d);
        }
        self.dirs
            .get_mut(dir)
            .ok_or_else(|| io::Error::other("directory vanished"))
    }

    fn inode_of(&mut self, file: &File) -> io::Result<&mut Inode> {
        let ino = *self.fds.get(&file.as_raw_fd()).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "file was not opened through the simulator",
            )
        })?;
        self.inodes
            .get_mut(&ino)
            .ok_or_else(|| io::Error::other("inode vanished"))
    }
}

fn apply(content: &mut Vec<u8>, op: &FileOp, keep: Option<usize>) {
    match op {
        FileOp::Write { pos, data } => {
            let data = &data[..keep.unwrap_or(data.len()).min(data.len())];
            let pos = *pos as usize;
            if content.len() < pos + data.len() {
                content.resize(pos + data.len(), 0);
            }
            content[pos..pos + data.len()].copy_from_slice(data);
        }
        FileOp::SetLen(len) => content.resize(*len as usize, 0),
    }
}

/// The durable content plus a random subset of the pending changes, writes possibly torn.
fn crash_content(st: &mut State, ino: u64) -> Vec<u8> {
    let Some(inode) = st.inodes.get_mut(&ino) else {
        return Vec::new();
    };
    let mut content = std::mem::take(&mut inode.durable);
    let pending = std::mem::take(&mut inode.pending);
    for op in &pending {
        if st.coin() {
            let keep = match op {
                FileOp::Write { data, .. } if st.coin() => {
                    Some(st.below(data.len() as u64 + 1) as usize)
                }
                _ => None,
            };
            apply(&mut content, op, keep);
        }
    }
    content
}

impl SimFs {
    /// An empty simulator whose random choices all follow from `seed`.
    pub fn new(seed: u64) -> Arc<SimFs> {
        Arc::new(SimFs {
            state: Mutex::new(State {
                rng: seed,
                next_inode: 1,
                fds: HashMap::new(),
                inodes: BTreeMap::new(),
                dirs: BTreeMap::new(),
                disk_full: false,
                failing_syncs: 0,
                failing_writes: 0,
            }),
        })
    }

    /// A [`Storage`] handle on this simulator, for `LogConfig::storage`.
    pub fn storage(self: &Arc<SimFs>) -> Storage {
        Storage::new(self.clone())
    }

    /// While full, writes fail with `ENOSPC` (after writing a random prefix) and new
    /// files cannot be created.
    pub fn set_disk_full(&self, full: bool) {
        self.state.lock().disk_full = full;
    }

    /// The next `n` file fsyncs fail with `EIO`, losing part of what they should have
    /// made durable.
    pub fn fail_next_syncs(&self, n: u32) {
        self.state.lock().failing_syncs = n;
    }

    /// The next `n` writes fail with `EIO` after writing a random prefix.
    pub fn fail_next_writes(&self, n: u32) {
        self.state.lock().failing_writes = n;
    }

    /// Cuts the power: every directory the simulator knows is rewritten to a state the
    /// disk could hold afterwards (see the module docs), which then counts as durable.
    /// Every file opened through the simulator must be closed first.
    pub fn power_cut(&self) -> io::Result<()> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        st.fds.clear();
        st.disk_full = false;
        st.failing_syncs = 0;
        st.failing_writes = 0;
        let dirs: Vec<PathBuf> = st.dirs.keys().cloned().collect();
        let mut inodes = BTreeMap::new();
        for path in dirs {
            let Some(mut dir) = st.dirs.remove(&path) else {
                continue;
            };
            let mut names = std::mem::take(&mut dir.durable);
            for op in std::mem::take(&mut dir.pending) {
                if !st.coin() {
                    continue;
                }
                match op {
                    DirOp::Link(name, ino) => {
                        names.insert(name, ino);
                    }
                    DirOp::Unlink(name) => {
                        names.remove(&name);
                    }
                    DirOp::Rename(from, to) => {
                        if let Some(ino) = names.remove(&from) {
                            names.insert(to, ino);
                        }
                    }
                }
            }
            if path.is_dir() {
                for name in RealFs.list_dir(&path)? {
                    let p = path.join(&name);
                    if p.is_file() {
                        std::fs::remove_file(p)?;
                    }
                }
            }
            let mut kept = BTreeMap::new();
            for (name, ino) in names {
                let content = match inodes.get(&ino) {
                    Some(Inode { durable, .. }) => durable.clone(),
                    None => {
                        let content = crash_content(st, ino);
                        inodes.insert(
                            ino,
                            Inode {
                                durable: content.clone(),
                                pending: Vec::new(),
                            },
                        );
                        content
                    }
                };
                std::fs::write(path.join(&name), &content)?;
                kept.insert(name, ino);
            }
            st.dirs.insert(
                path,
                Dir {
                    durable: kept.clone(),
                    current: kept,
                    pending: Vec::new(),
                },
            );
        }
        st.inodes = inodes;
        Ok(())
    }
}

impl FileSystem for SimFs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<File> {
        let mut st = self.state.lock();
        let (dir, name) = split(path)?;
        let full = st.disk_full;
        let existing = st.dir(&dir)?.current.get(&name).copied();
        let ino = match (existing, mode) {
            (Some(ino), _) => ino,
            (None, OpenMode::Read | OpenMode::ReadWrite) => {
                return Err(io::ErrorKind::NotFound.into());
            }
            (None, OpenMode::Create | OpenMode::CreateTruncate) => {
                if full {
                    return Err(errno(rustix::io::Errno::NOSPC));
                }
                let ino = st.next_inode;
                st.next_inode += 1;
                st.inodes.insert(ino, Inode::default());
                let d = st.dir(&dir)?;
                d.current.insert(name.clone(), ino);
                d.pending.push(DirOp::Link(name, ino));
                ino
            }
        };
        let file = RealFs.open(path, mode)?;
        if mode == OpenMode::CreateTruncate && existing.is_some() {
            if let Some(inode) = st.inodes.get_mut(&ino) {
                inode.pending.push(FileOp::SetLen(0));
            }
        }
        st.fds.insert(file.as_raw_fd(), ino);
        Ok(file)
    }

    fn write_at(&self, file: &File, bufs: &[&[u8]], pos: u64) -> io::Result<()> {
        let mut st = self.state.lock();
        let data: Vec<u8> = bufs.concat();
        let failure = if st.failing_writes > 0 {
            st.failing_writes -= 1;
            Some(rustix::io::Errno::IO)
        } else if st.disk_full {
            Some(rustix::io::Errno::NOSPC)
        } else {
            None
        };
        let keep = match failure {
            Some(_) => st.below(data.len() as u64) as usize,
            None => data.len(),
        };
        RealFs.write_at(file, &[&data[..keep]], pos)?;
        st.inode_of(file)?.pending.push(FileOp::Write {
            pos,
            data: data[..keep].to_vec(),
        });
        match failure {
            Some(e) => Err(errno(e)),
            None => Ok(()),
        }
    }

    fn set_len(&self, file: &File, len: u64) -> io::Result<()> {
        let mut st = self.state.lock();
        RealFs.set_len(file, len)?;
        st.inode_of(file)?.pending.push(FileOp::SetLen(len));
        Ok(())
    }

    fn sync_data(&self, file: &File) -> io::Result<()> {
        let mut st = self.state.lock();
        let failing = st.failing_syncs > 0;
        if failing {
            st.failing_syncs -= 1;
        }
        let ino = *st
            .fds
            .get(&file.as_raw_fd())
            .ok_or_else(|| io::Error::other("file was not opened through the simulator"))?;
        if failing {
            let content = crash_content(&mut st, ino);
            if let Some(inode) = st.inodes.get_mut(&ino) {
                inode.durable = content;
            }
            return Err(errno(rustix::io::Errno::IO));
        }
        let inode = st.inode_of(file)?;
        for op in std::mem::take(&mut inode.pending) {
            apply(&mut inode.durable, &op, None);
        }
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        let d = st.dir(dir)?;
        d.durable = d.current.clone();
        d.pending.clear();
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        let (dir, from_name) = split(from)?;
        let (to_dir, to_name) = split(to)?;
        if dir != to_dir {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the simulator renames within one directory only",
            ));
        }
        let d = st.dir(&dir)?;
        let ino = d
            .current
            .remove(&from_name)
            .ok_or(io::ErrorKind::NotFound)?;
        d.current.insert(to_name.clone(), ino);
        d.pending.push(DirOp::Rename(from_name, to_name));
        RealFs.rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        let (dir, name) = split(path)?;
        let d = st.dir(&dir)?;
        d.current.remove(&name).ok_or(io::ErrorKind::NotFound)?;
        d.pending.push(DirOp::Unlink(name));
        RealFs.remove_file(path)
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        RealFs.create_dir_all(dir)?;
        st.dir(dir)?;
        Ok(())
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut st = self.state.lock();
        if !dir.is_dir() {
            return Err(io::ErrorKind::NotFound.into());
        }
        Ok(st.dir(dir)?.current.keys().cloned().collect())
    }
}
