//! Opening a log directory: list the segments, load or rebuild their indexes, and cut a
//! torn or corrupt tail back to the last whole batch when the last shutdown was not clean.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, RwLock};

use super::{
    io_err, PartitionLog, Published, Writer, CLEAN_SHUTDOWN_FILE, LOG_START_FILE,
    RECOVERY_MAX_BATCH, RECOVERY_POINT_FILE,
};
use crate::segment::{Io, Segment};
use crate::{LogConfig, LogError};

impl PartitionLog {
    /// Opens (creating if needed) the log in `dir`, recovering the tail when the last
    /// shutdown was not clean.
    pub fn open(dir: &Path, config: LogConfig) -> Result<PartitionLog, LogError> {
        let io = Io {
            storage: config.storage.clone(),
            files: config.open_files.clone(),
        };
        io.storage.create_dir_all(dir).map_err(io_err(dir))?;
        let marker = dir.join(CLEAN_SHUTDOWN_FILE);
        let clean = io.read_opt(&marker).map_err(io_err(&marker))?.is_some();
        // Whether opening wrote anything (repairs, rebuilt indexes, a first segment), so
        // a clean close must fsync again.
        let mut changed = !clean;
        let stored_start = read_offset_file(&io, dir, LOG_START_FILE);
        let recovery_point = read_offset_file(&io, dir, RECOVERY_POINT_FILE).unwrap_or(i64::MIN);
        let interval = config.index_interval_bytes.max(1);
        let max_batch = (config.max_batch_bytes as usize).max(RECOVERY_MAX_BATCH);
        super::compact::recover_swaps(&io, dir, max_batch).map_err(io_err(dir))?;
        let mut bases = list_segments(&io, dir).map_err(io_err(dir))?;
        if let Some(start) = stored_start {
            // Segments wholly below the durable start are leftovers of a deletion a
            // crash cut short (the start is made durable before files are removed).
            let stale = bases.windows(2).take_while(|w| w[1] <= start).count();
            for &base in &bases[..stale] {
                tracing::info!(base, "removing a segment below the log start");
                if let Ok(s) = Segment::open(&io, dir, base) {
                    s.delete_files();
                }
            }
            changed |= stale > 0;
            bases.drain(..stale);
        }

        let mut segments: Vec<Arc<Segment>> = Vec::with_capacity(bases.len().max(1));
        let mut end_offset = None;
        for (i, &base) in bases.iter().enumerate() {
            let last = i + 1 == bases.len();
            let seg = Segment::open(&io, dir, base).map_err(io_err(dir))?;
            let loaded = if clean || (!last && base < recovery_point) {
                seg.load(max_batch).map_err(io_err(&seg.log_path))?
            } else {
                None
            };
            let scan = match loaded {
                Some(scan) => scan,
                None => {
                    changed = true;
                    let before = seg.size();
                    let scan = seg
                        .rebuild(interval, max_batch, true)
                        .map_err(io_err(&seg.log_path))?;
                    if let Some(why) = &scan.error {
                        tracing::warn!(
                            segment = %seg.log_path.display(),
                            truncated_bytes = before - scan.valid_len,
                            kept_bytes = scan.valid_len,
                            next_offset = scan.next_offset.unwrap_or(base),
                            reason = %why,
                            "recovery truncated a torn or corrupt log tail"
                        );
                    } else if clean || !last {
                        tracing::info!(segment = %seg.log_path.display(), "rebuilt segment indexes");
                    }
                    scan
                }
            };
            end_offset = Some(scan.next_offset.unwrap_or(base));
            // Segments hold consecutive offsets: a segment ending short of the next one's
            // base lost batches (corruption, or a power cut dropping unsynced writes), and
            // nothing after it can be trusted. Junk after its last batch that still ends
            // at the next base (a failed write whose cut did not reach the disk) was
            // truncated above and loses nothing.
            let damaged = bases
                .get(i + 1)
                .is_some_and(|&next| scan.next_offset.unwrap_or(base) != next);
            segments.push(Arc::new(seg));
            if damaged && !last {
                changed = true;
                // Offsets must stay contiguous: nothing after damage can be trusted.
                for &later in &bases[i + 1..] {
                    tracing::warn!(base = later, "deleting segment after a corrupt one");
                    if let Ok(s) = Segment::open(&io, dir, later) {
                        s.delete_files();
                    }
                }
                break;
            }
        }
        if segments.is_empty() {
            changed = true;
            let base = stored_start.unwrap_or(0).max(0);
            let seg = Segment::create(&io, dir, base).map_err(io_err(dir))?;
            segments.push(Arc::new(seg));
            end_offset = Some(base);
        }
        let active = segments.last().cloned().expect("at least one segment");
        let end_offset = end_offset.unwrap_or(active.base).max(active.base);
        let start = stored_start
            .unwrap_or(i64::MIN)
            .max(segments[0].base)
            .min(end_offset);
        // A brand-new log has nothing to make durable yet: its first segment's name
        // becomes durable with the directory fsync `sync_now` runs before the first
        // append is reported durable (a crash before that just finds no segment).
        let fresh = bases.is_empty() && !clean;
        if !clean && !fresh {
            active
                .sync_data(max_batch)
                .map_err(io_err(&active.log_path))?;
        }
        if clean {
            io.storage.remove_file(&marker).map_err(io_err(&marker))?;
        }
        // Without a usable checkpoint (a log written before transactions were
        // tracked), open transactions are looked for from what recovery rescans.
        let fallback = if clean {
            active.base
        } else {
            recovery_point.min(active.base)
        };
        let txn = super::txn::recover_transactions(&io, dir, &segments, end_offset, fallback)?;
        // After the rescan, which may create or remove `.txnindex` files: their names are
        // durable with the repairs and the removed clean-shutdown marker.
        if !fresh {
            io.sync_dir(dir).map_err(io_err(dir))?;
        }
        let published = Published {
            end_offset,
            active_base: active.base,
            active_size: active.size(),
            stable_offset: txn.stable_offset(end_offset),
        };
        let rolls = super::roll_settings::RollSettings::new(&config);
        Ok(PartitionLog {
            opened_clean: clean,
            dir: dir.to_path_buf(),
            config,
            rolls,
            io,
            segments: RwLock::new(segments),
            writer: Mutex::new(Writer {
                active,
                active_since: Instant::now(),
                closed: false,
            }),
            published: Mutex::new(published),
            start_offset: AtomicI64::new(start),
            flushed: AtomicI64::new(end_offset),
            sync_lock: std::sync::Mutex::new(()),
            unsynced: Mutex::new(Vec::new()),
            dir_dirty: AtomicBool::new(fresh),
            recovery_point: AtomicI64::new(recovery_point),
            no_checkpoint_at: AtomicI64::new(i64::MIN),
            changed: AtomicBool::new(changed),
            written: AtomicU64::new(0),
            synced_written: AtomicU64::new(0),
            cleaning: Mutex::new(()),
            txn: Mutex::new(txn),
        })
    }
}

/// Base offsets of the segments in `dir`; removes index files left without a log.
fn list_segments(io: &Io, dir: &Path) -> std::io::Result<Vec<i64>> {
    let mut bases = Vec::new();
    let mut orphans = Vec::new();
    for name in io.storage.list_dir(dir)? {
        let Some((stem, ext)) = name.split_once('.') else {
            continue;
        };
        if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(base) = stem.parse::<i64>() else {
            continue;
        };
        match ext {
            "log" => bases.push(base),
            "index" | "timeindex" | "txnindex" => orphans.push((base, dir.join(&name))),
            _ => {}
        }
    }
    bases.sort_unstable();
    for (base, path) in orphans {
        if bases.binary_search(&base).is_err() {
            tracing::warn!(path = %path.display(), "removing index without a segment");
            let _ = io.storage.remove_file(&path);
        }
    }
    Ok(bases)
}

fn read_offset_file(io: &Io, dir: &Path, name: &str) -> Option<i64> {
    let bytes = io.read_opt(&dir.join(name)).ok()??;
    std::str::from_utf8(&bytes).ok()?.trim().parse().ok()
}
