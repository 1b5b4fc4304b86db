//! The wall clock in the unit record batches use (milliseconds since the Unix epoch): one
//! definition for every crate that stamps records or compares against their timestamps.

/// Now, in milliseconds since the Unix epoch; 0 if the clock is before the epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
