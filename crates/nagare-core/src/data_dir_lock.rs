//! One process per data directory: an exclusive `flock` on `DATA/.lock`, taken before
//! anything else in the directory is read or written and held until the [`DataDirLock`] is
//! dropped (with the [`crate::Broker`], i.e. for the process lifetime).
//!
//! Two processes on one directory would each believe they own every partition: the second
//! writes clean-shutdown markers into logs the first still appends to, and the next start
//! trusts those markers and drops the first one's acknowledged records. `flock` locks are
//! released by the kernel when the process dies, so a crash never leaves a stale lock.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use rustix::fs::{flock, FlockOperation};

use crate::CoreError;

/// The lock file's name inside the data directory (Kafka uses the same name).
pub const LOCK_FILE: &str = ".lock";

/// Holds the data directory's lock; dropping it (closing the file) releases the lock.
#[derive(Debug)]
pub struct DataDirLock {
    path: PathBuf,
    _file: File,
}

impl DataDirLock {
    /// Creates `dir` if needed and locks it. Fails at once, without changing anything in an
    /// existing directory, when `dir` is not a directory or another process holds the lock
    /// (the error names the directory and that process's PID).
    pub fn acquire(dir: &Path) -> Result<DataDirLock, CoreError> {
        match std::fs::metadata(dir) {
            Ok(meta) if !meta.is_dir() => {
                return Err(CoreError::DataDirNotADirectory(dir.display().to_string()))
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(dir).map_err(|e| CoreError::io(dir, e))?;
            }
            Err(e) => return Err(CoreError::io(dir, e)),
        }
        let path = dir.join(LOCK_FILE);
        // No truncation on open: a second process must not erase the holder's PID.
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| CoreError::io(&path, e))?;
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(CoreError::DataDirLocked {
                    dir: dir.display().to_string(),
                    holder: read_holder(&mut file),
                })
            }
            Err(e) => return Err(CoreError::io(&path, e.into())),
        }
        write_pid(&mut file).map_err(|e| CoreError::io(&path, e))?;
        Ok(DataDirLock { path, _file: file })
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn write_pid(file: &mut File) -> std::io::Result<()> {
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    writeln!(file, "{}", std::process::id())?;
    file.flush()
}

/// The holder's PID as written in the lock file, if readable (it may be mid-write).
fn read_holder(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.take(64).read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_one_dir_fails_and_names_the_holder() {
        let tmp = tempfile::tempdir().unwrap();
        let first = DataDirLock::acquire(tmp.path()).unwrap();
        let err = DataDirLock::acquire(tmp.path()).unwrap_err();
        match &err {
            CoreError::DataDirLocked { dir, holder } => {
                assert_eq!(dir, &tmp.path().display().to_string());
                assert_eq!(*holder, Some(std::process::id()));
            }
            other => panic!("unexpected error {other:?}"),
        }
        let text = err.to_string();
        assert!(text.contains(&tmp.path().display().to_string()), "{text}");
        assert!(text.contains(&std::process::id().to_string()), "{text}");
        drop(first);
        DataDirLock::acquire(tmp.path()).unwrap();
    }

    #[test]
    fn a_missing_dir_is_created() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        let lock = DataDirLock::acquire(&dir).unwrap();
        assert!(lock.path().is_file());
    }

    #[test]
    fn a_file_is_not_a_data_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let err = DataDirLock::acquire(&file).unwrap_err();
        assert!(matches!(err, CoreError::DataDirNotADirectory(_)), "{err}");
        assert!(err.to_string().contains("not a directory"), "{err}");
        assert_eq!(std::fs::read(&file).unwrap(), b"x");
    }
}
