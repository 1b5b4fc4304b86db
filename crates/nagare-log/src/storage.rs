//! The few file-system operations the log performs, behind one trait, so tests can run
//! the log on a simulated disk that loses unsynced writes at a power cut (see `sim`).
//!
//! Every operation that changes what is on disk (create, write, truncate, rename, remove)
//! and every durability point (file fsync, directory fsync) goes through [`FileSystem`].
//! Reads use the returned [`File`] directly (`pread`, `sendfile`): the simulated file
//! system is backed by real files, so what a reader sees before a crash is what the
//! kernel's page cache would show.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice};
use std::path::Path;
use std::sync::Arc;

/// How a file is opened. Files are never opened in append mode: writes name their
/// position, so a write after a failed one cannot land behind leftover bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Read only; the file must exist.
    Read,
    /// Read and write; the file must exist.
    ReadWrite,
    /// Read and write, created if missing, kept if present.
    Create,
    /// Read and write, created if missing, emptied if present.
    CreateTruncate,
}

/// The file-system operations of the log. Implementations must be usable from many
/// threads at once.
pub trait FileSystem: Send + Sync {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<File>;
    /// Writes all of `bufs` at `pos`. On error a prefix may have been written.
    fn write_at(&self, file: &File, bufs: &[&[u8]], pos: u64) -> io::Result<()>;
    fn set_len(&self, file: &File, len: u64) -> io::Result<()>;
    /// Makes the file's data durable (`fdatasync`).
    fn sync_data(&self, file: &File) -> io::Result<()>;
    /// Makes the directory's entries (created, renamed, removed files) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Names of the entries of `dir`, sorted.
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>>;
}

/// A shared handle on the file system the log uses; the real one by default.
#[derive(Clone)]
pub struct Storage(Arc<dyn FileSystem>);

impl Storage {
    pub fn new(fs: Arc<dyn FileSystem>) -> Storage {
        Storage(fs)
    }
    /// The operating system's file system.
    pub fn real() -> Storage {
        Storage(Arc::new(RealFs))
    }
}

impl Default for Storage {
    fn default() -> Self {
        Storage::real()
    }
}

impl fmt::Debug for Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Storage")
    }
}

impl std::ops::Deref for Storage {
    type Target = dyn FileSystem;
    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

/// The operating system's file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealFs;

impl FileSystem for RealFs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<File> {
        let mut o = OpenOptions::new();
        o.read(true);
        match mode {
            OpenMode::Read => {}
            OpenMode::ReadWrite => {
                o.write(true);
            }
            OpenMode::Create => {
                o.write(true).create(true);
            }
            OpenMode::CreateTruncate => {
                o.write(true).create(true).truncate(true);
            }
        }
        o.open(path)
    }

    fn write_at(&self, file: &File, bufs: &[&[u8]], pos: u64) -> io::Result<()> {
        let mut slices: Vec<IoSlice<'_>> = bufs
            .iter()
            .filter(|b| !b.is_empty())
            .map(|b| IoSlice::new(b))
            .collect();
        let mut rest = &mut slices[..];
        let mut at = pos;
        while !rest.is_empty() {
            match rustix::io::pwritev(file, rest, at) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    at += n as u64;
                    IoSlice::advance_slices(&mut rest, n);
                }
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    fn set_len(&self, file: &File, len: u64) -> io::Result<()> {
        file.set_len(len)
    }

    fn sync_data(&self, file: &File) -> io::Result<()> {
        file.sync_data()
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            if let Ok(name) = entry?.file_name().into_string() {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }
}
