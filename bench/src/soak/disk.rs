//! Whether a soak's writes fit on its data directory's disk, asked before
//! the soak starts. A soak writes all it serves: `billed` stores every
//! answer's audio (its retention is days, longer than any soak) and every
//! request leaves its records. On a faster machine a 30-minute soak wrote
//! about 3 GiB a minute, more than the disk had free: it failed in its 26th
//! minute, its report lost. So the calibration's writes (the data
//! directory's growth while it ran, at twice the soak's rate) give the
//! soak's, and a soak that would not fit is refused with what would.

use std::path::Path;
use std::time::Duration;

/// Room kept beyond the forecast (the forecast is a few seconds' worth).
const MARGIN: f64 = 1.2;

/// Bytes the files under `dir` take on disk (allocated blocks).
pub(super) fn used_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => used_bytes(&e.path()),
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

/// Bytes an unprivileged writer may still use on `dir`'s file system.
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is a plain C struct, all zeroes a valid value.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and a struct statvfs to fill.
    if unsafe { libc::statvfs(path.as_ptr(), &mut s) } != 0 {
        return None;
    }
    Some(s.f_bavail as u64 * s.f_frsize as u64)
}

/// `Err` naming what the soak would write and what is free when `grown`
/// bytes written in `took` of calibration (at `1 / share` of the soak's
/// rate), kept for `soak`, would not fit on `dir`'s file system.
pub(super) fn check(
    dir: &Path,
    grown: u64,
    took: Duration,
    share: f64,
    soak: Duration,
) -> Result<(), String> {
    let (Some(free), secs) = (free_bytes(dir), took.as_secs_f64()) else {
        return Ok(());
    };
    if secs <= 0.0 {
        return Ok(());
    }
    let per_minute = grown as f64 / secs * share * 60.0;
    let need = per_minute * soak.as_secs_f64() / 60.0 * MARGIN;
    if need <= free as f64 {
        return Ok(());
    }
    let gib = |b: f64| b / (1u64 << 30) as f64;
    Err(format!(
        "soak: the gateway would write about {:.1} GiB in {:.0} minutes ({:.0} MiB a minute, \
         measured in the calibration; {:.0} % more kept as room), and the file system of {} has \
         {:.1} GiB free: at most {:.0} minutes fit. Run a shorter soak, or point TMPDIR (where \
         the data directory is made) at a larger disk",
        gib(need),
        soak.as_secs_f64() / 60.0,
        per_minute / (1u64 << 20) as f64,
        (MARGIN - 1.0) * 100.0,
        dir.display(),
        gib(free as f64),
        (free as f64 / (per_minute * MARGIN)).floor()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_soak_that_would_not_fit_is_refused_with_what_would() {
        let dir = std::env::temp_dir();
        let free = free_bytes(&dir).expect("statvfs of the temp dir");
        let soak = Duration::from_secs(30 * 60);
        // A calibration that wrote the free space in 6 s.
        let err = check(&dir, free, Duration::from_secs(6), 0.5, soak).unwrap_err();
        assert!(err.contains("at most 0 minutes fit"), "{err}");
        assert!(err.contains("TMPDIR"), "{err}");
        // One that wrote nothing.
        assert!(check(&dir, 0, Duration::from_secs(6), 0.5, soak).is_ok());
    }

    #[test]
    fn used_bytes_counts_the_files_below() {
        let dir = std::env::temp_dir().join(format!("soak-disk-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("a")).unwrap();
        std::fs::write(dir.join("a/f"), vec![1u8; 64 * 1024]).unwrap();
        let used = used_bytes(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(used >= 64 * 1024, "{used}");
    }
}
