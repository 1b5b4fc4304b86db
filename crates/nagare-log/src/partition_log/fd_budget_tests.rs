//! Many partitions on a small descriptor budget: segment files are opened lazily and
//! closed when the shared budget is reached, so 10,000 logs work with 64 descriptors, and
//! under a low `RLIMIT_NOFILE` the log evicts and retries instead of failing on EMFILE.

use bytes::Bytes;

use super::*;
use crate::batch::{build_batch, decode_records, NewRecord};
use crate::OpenFiles;

const PARTITIONS: usize = 10_000;

fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(d) = tempfile::tempdir_in(shm) {
            return d;
        }
    }
    tempfile::tempdir().unwrap()
}

fn config(files: &OpenFiles) -> LogConfig {
    LogConfig {
        // Small segments so every log has rolled ones too.
        segment_bytes: 200,
        retention: None,
        open_files: files.clone(),
        ..LogConfig::default()
    }
}

fn value(p: usize, i: usize) -> Bytes {
    Bytes::from(format!("p{p}-r{i}"))
}

fn append(log: &PartitionLog, p: usize, i: usize) {
    let mut b = build_batch(&[NewRecord {
        value: Some(value(p, i)),
        timestamp: 1_000 + i as i64,
        ..Default::default()
    }]);
    log.append(&mut b).unwrap();
}

fn check(log: &PartitionLog, p: usize, count: usize) {
    assert_eq!(log.log_end_offset(), count as i64, "partition {p}");
    let mut got = Vec::new();
    for b in log.read_batches(0, 1 << 20).unwrap() {
        got.extend(decode_records(&b).unwrap().into_iter().map(|r| r.value));
    }
    let want: Vec<Option<Bytes>> = (0..count).map(|i| Some(value(p, i))).collect();
    assert_eq!(got, want, "partition {p}");
}

/// Opens `PARTITIONS` logs under `root`, appends three records to each (rolling), reads
/// every one back, closes half cleanly, reopens all and checks and extends them again.
fn many_partitions(root: &Path, files: &OpenFiles, limit: usize) {
    let dirs: Vec<PathBuf> = (0..PARTITIONS)
        .map(|p| root.join(format!("t-{p}")))
        .collect();
    let logs: Vec<PartitionLog> = dirs
        .iter()
        .map(|d| PartitionLog::open(d, config(files)).unwrap())
        .collect();
    for round in 0..3 {
        for (p, log) in logs.iter().enumerate() {
            append(log, p, round);
            assert!(files.open_count() <= limit);
        }
    }
    for (p, log) in logs.iter().enumerate() {
        check(log, p, 3);
        log.sync_to(3).unwrap();
        if p % 2 == 0 {
            log.close().unwrap();
        }
    }
    assert!(files.open_count() <= limit);
    drop(logs);
    assert_eq!(files.open_count(), 0);
    let logs: Vec<PartitionLog> = dirs
        .iter()
        .map(|d| PartitionLog::open(d, config(files)).unwrap())
        .collect();
    for (p, log) in logs.iter().enumerate() {
        check(log, p, 3);
        append(log, p, 3);
        assert!(files.open_count() <= limit);
    }
    for (p, log) in logs.iter().enumerate() {
        check(log, p, 4);
    }
}

#[test]
fn ten_thousand_partitions_share_64_descriptors() {
    let root = scratch();
    let files = OpenFiles::new(64);
    many_partitions(root.path(), &files, 64);
}

const CHILD_ENV: &str = "NAGARE_LOG_TEST_LOW_NOFILE";

/// Runs the scenario in a child process whose `RLIMIT_NOFILE` is 256: once with the
/// default budget (half the limit), once with a budget far above the limit, so opens
/// fail with EMFILE and the log must evict and retry.
#[test]
fn ten_thousand_partitions_under_a_low_nofile_limit() {
    if std::env::var_os(CHILD_ENV).is_some() {
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        rustix::process::setrlimit(
            rustix::process::Resource::Nofile,
            rustix::process::Rlimit {
                current: Some(256),
                maximum: limit.maximum,
            },
        )
        .unwrap();
        assert_eq!(crate::default_budget(), 128);
        let root = scratch();
        let files = OpenFiles::new(crate::default_budget());
        many_partitions(&root.path().join("a"), &files, 128);
        let files = OpenFiles::new(1_000_000);
        many_partitions(&root.path().join("b"), &files, 1_000_000);
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "partition_log::fd_budget_tests::ten_thousand_partitions_under_a_low_nofile_limit",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{text}");
    assert!(text.contains("1 passed"), "child ran no test:\n{text}");
}

/// A fetch over far more partitions than the budget holds every slice at once (as a
/// response waiting for `sendfile` does): slices stop at the budget and the rest of the
/// batches come back copied, with nothing lost or reordered.
#[test]
fn held_slices_never_exceed_the_budget() {
    const BUDGET: usize = 8;
    const LOGS: usize = 100;
    let dir = scratch();
    let files = OpenFiles::new(BUDGET);
    let logs: Vec<PartitionLog> = (0..LOGS)
        .map(|p| PartitionLog::open(&dir.path().join(format!("t-{p}")), config(&files)).unwrap())
        .collect();
    for round in 0..3 {
        for (p, log) in logs.iter().enumerate() {
            append(log, p, round);
        }
    }
    let mut held = Vec::new();
    let mut copied = 0;
    for (p, log) in logs.iter().enumerate() {
        let res = log.read(0, 1 << 20).unwrap();
        assert!(files.open_count() + files.lent_count() <= BUDGET);
        let mut got = Vec::new();
        for s in &res.slices {
            let mut buf = vec![0u8; s.len as usize];
            std::os::unix::fs::FileExt::read_exact_at(&*s.file, &mut buf, s.position).unwrap();
            for r in crate::batch::split_batches(&buf).unwrap() {
                got.extend(
                    decode_records(&buf[r])
                        .unwrap()
                        .into_iter()
                        .map(|r| r.value),
                );
            }
        }
        for r in crate::batch::split_batches(&res.copied).unwrap() {
            got.extend(
                decode_records(&res.copied[r])
                    .unwrap()
                    .into_iter()
                    .map(|r| r.value),
            );
        }
        let want: Vec<Option<Bytes>> = (0..3).map(|i| Some(value(p, i))).collect();
        assert_eq!(got, want, "partition {p}");
        copied += usize::from(!res.copied.is_empty());
        held.push(res);
    }
    assert!(files.lent_count() <= BUDGET);
    assert!(copied > LOGS / 2, "most reads were copied: {copied}");
    drop(held);
    assert_eq!(files.lent_count(), 0);
    // With the slices given back, reads get slices again.
    assert!(!logs[0].read(0, 1 << 20).unwrap().slices.is_empty());
}
