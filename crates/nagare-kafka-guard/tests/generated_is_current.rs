//! `src/generated.rs` is what `tools/gen_guard.py` makes from the kafka-protocol sources
//! Cargo.lock pins: a hand edit, or a codec bump without regenerating, fails here.

use std::path::Path;
use std::process::Command;

#[test]
fn generated_walkers_are_current() {
    let tool = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/gen_guard.py");
    let done = Command::new("python3")
        .arg(&tool)
        .arg("--check")
        .output()
        .expect("python3 runs tools/gen_guard.py --check");
    assert!(
        done.status.success(),
        "{}{}",
        String::from_utf8_lossy(&done.stdout),
        String::from_utf8_lossy(&done.stderr)
    );
}
