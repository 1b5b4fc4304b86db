//! Bakes the git commit into the binary (`nagare --version`, `GET /status`): the short
//! hash of HEAD, or `unknown` outside a git checkout (a source tarball, `cargo install`
//! from a registry). Reruns only when HEAD or the branch it points to moves, so
//! incremental builds stay cheap.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=NAGARE_GIT_COMMIT={commit}");
    if let Some(git_dir) = git_dir() {
        let head = git_dir.join("HEAD");
        println!("cargo:rerun-if-changed={}", head.display());
        // HEAD names a branch: its ref file moves on every commit (or packed-refs does).
        if let Ok(text) = std::fs::read_to_string(&head) {
            if let Some(r) = text.strip_prefix("ref: ") {
                let common = common_dir(&git_dir);
                // Only paths that exist: cargo reruns the script on every build for a
                // missing one. A packed branch has no file of its own yet: watch the
                // directory its first loose ref will be written to.
                let branch = common.join(r.trim());
                let watched = if branch.exists() {
                    Some(branch)
                } else {
                    branch
                        .parent()
                        .filter(|d| d.exists())
                        .map(Path::to_path_buf)
                };
                let packed = Some(common.join("packed-refs")).filter(|p| p.exists());
                for path in watched.into_iter().chain(packed) {
                    println!("cargo:rerun-if-changed={}", path.display());
                }
            }
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}

/// The git directory of the checkout (`.git`, or what a worktree's `.git` file points at).
fn git_dir() -> Option<PathBuf> {
    let out = Command::new("git")
        .args(["rev-parse", "--absolute-git-dir"])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let dir = String::from_utf8(out.stdout).ok()?;
    Some(PathBuf::from(dir.trim()))
}

/// Where branch refs live: a worktree's git dir names the main one in `commondir`.
fn common_dir(git_dir: &Path) -> PathBuf {
    match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(rel) => git_dir.join(rel.trim()),
        Err(_) => git_dir.to_path_buf(),
    }
}
