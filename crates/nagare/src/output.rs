//! `--output table|json` of every listing command: a table for people (the default), or
//! the admin API's JSON as it came, pretty-printed, for scripts (`jq`).

use clap::ValueEnum;
use serde::Serialize;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum Output {
    #[default]
    Table,
    Json,
}

pub(crate) fn print_json<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Bytes for people: `512 B`, `1.5 KiB`, `3.2 GiB`.
pub(crate) fn bytes(n: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{v:.0} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// A duration for people: `3d 4h`, `2h 5m`, `4m 10s`, `12s`.
pub(crate) fn duration(seconds: u64) -> String {
    let (d, h, m, s) = (
        seconds / 86_400,
        seconds / 3600 % 24,
        seconds / 60 % 60,
        seconds % 60,
    );
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {s}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn people_units() {
        assert_eq!(super::bytes(512.0), "512 B");
        assert_eq!(super::bytes(1536.0), "1.5 KiB");
        assert_eq!(super::duration(12), "12s");
        assert_eq!(super::duration(3 * 3600 + 120), "3h 2m");
        assert_eq!(super::duration(90_000), "1d 1h");
    }
}
