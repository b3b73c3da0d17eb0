//! What the tests that use a browser or Node share: Debian's `chromium`
//! found on `PATH`, and a folder's npm packages installed (`npm ci`) when
//! missing.

use std::path::{Path, PathBuf};

/// Debian's chromium, or `None` when it is not installed (then a browser
/// test is skipped, unless `GATEWAY_TEST_REQUIRE_CHROMIUM` is set: the test
/// command sets it after `scripts/setup-tools.sh` installed `chromium`).
pub fn chromium(what: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("chromium"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("GATEWAY_TEST_REQUIRE_CHROMIUM").is_none(),
            "chromium is not installed (scripts/setup-tools.sh installs it)"
        );
        eprintln!("chromium not installed: {what} not checked in a browser");
    }
    found
}

/// `npm ci` in `dir` unless `package` is installed there (once at a time).
pub fn npm_installed(dir: &Path, package: &str) {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _held = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if dir
        .join("node_modules")
        .join(package)
        .join("package.json")
        .exists()
    {
        return;
    }
    let ok = std::process::Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(dir)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(
        ok,
        "{package} is not installed and `npm ci` in {} failed: run scripts/setup-tools.sh",
        dir.display()
    );
}
