//! What the power-loss simulations under the core share: the seeded choices, a scratch
//! directory, and the loop over seeds.

use std::path::Path;

/// splitmix64: the test's own choices, all following from the seed.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A temporary directory, in memory when `/dev/shm` is there (the simulator writes a lot).
pub(crate) fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(d) = tempfile::tempdir_in(shm) {
            return d;
        }
    }
    tempfile::tempdir().unwrap()
}

/// Runs `run` for the seed named by `$one` if set, else for seeds `0..$many` (default
/// `default`); a failure names the seed and how to run it alone.
pub(crate) fn for_each_seed(
    one: &str,
    many: &str,
    default: u64,
    run: impl Fn(u64) + std::panic::RefUnwindSafe,
) {
    let seeds: Vec<u64> = match std::env::var(one) {
        Ok(s) => vec![s
            .parse()
            .unwrap_or_else(|_| panic!("{one} must be a number"))],
        Err(_) => {
            let n = std::env::var(many)
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(default);
            (0..n).collect()
        }
    };
    for seed in seeds {
        let result = std::panic::catch_unwind(|| run(seed));
        if let Err(e) = result {
            eprintln!("power-loss simulation failed for seed {seed} ({one}={seed})");
            std::panic::resume_unwind(e);
        }
    }
}
