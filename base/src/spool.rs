//! The spool: files a request writes to disk while it runs (a
//! transcription's upload), under `<data dir>/spool/`.
//!
//! Each running instance owns one directory there, `<name>/`, held by an
//! exclusive `flock` on `<name>.lock` for as long as the process lives (the
//! kernel drops the lock when the process dies, `kill -9` included). At
//! start-up an instance sweeps every directory whose lock it can take:
//! those are the spool files of a crashed (or stopped) instance, which no
//! request will ever remove. Files directly under `spool/` (the layout of
//! earlier versions) are swept too. Several instances sharing a data
//! directory never sweep each other's live files.
//!
//! Everything here is the owner's only, whatever the umask: `spool/` and
//! each instance's directory 0700 (`spool/` is set so at every start, in
//! case an earlier version made it otherwise), lock files and spooled
//! files 0600 ([`SpoolDir::create_file`]). A spooled file is a caller's
//! upload.

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Mode of the spool's directories.
const DIR_MODE: u32 = 0o700;
/// Mode of the spool's files (lock files, spooled uploads).
const FILE_MODE: u32 = 0o600;

/// Whether an instance serves from `data_dir` now: the lock of one of
/// its spool directories is held (`gateway restore` refuses then).
pub fn in_use(data_dir: &Path) -> io::Result<bool> {
    let root = data_dir.join("spool");
    let entries = match std::fs::read_dir(&root) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    for e in entries {
        let path = e?.path();
        if path.extension().is_some_and(|x| x == "lock") {
            let file = OpenOptions::new().read(true).write(true).open(&path)?;
            if !try_lock(&file)? {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// This instance's spool directory, held while the value lives.
#[derive(Debug)]
pub struct SpoolDir {
    path: PathBuf,
    _lock: File,
}

impl Drop for SpoolDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
        let _ = std::fs::remove_file(self.path.with_extension("lock"));
    }
}

/// Takes `file`'s exclusive lock without waiting: `false` if another
/// process holds it.
fn try_lock(file: &File) -> io::Result<bool> {
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(std::fs::TryLockError::WouldBlock) => Ok(false),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

impl SpoolDir {
    /// Sweeps what crashed instances left under `<data_dir>/spool/`, then
    /// claims a fresh directory. Returns the directory and how many entries
    /// were swept.
    pub fn open(data_dir: &Path) -> io::Result<(SpoolDir, usize)> {
        let root = data_dir.join("spool");
        DirBuilder::new()
            .recursive(true)
            .mode(DIR_MODE)
            .create(&root)?;
        std::fs::set_permissions(&root, Permissions::from_mode(DIR_MODE))?;
        // A failed sweep is no reason not to start: what is left stays.
        let swept = sweep(&root).unwrap_or_else(|e| {
            tracing::warn!(error = %e, dir = %root.display(), "sweeping the spool failed");
            0
        });
        loop {
            let name = format!("{}-{:016x}", std::process::id(), rand::random::<u64>());
            let lock_path = root.join(format!("{name}.lock"));
            let lock = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(FILE_MODE)
                .open(&lock_path)?;
            if !try_lock(&lock)? {
                continue;
            }
            // A sweeper that took the lock before us has unlinked the file:
            // ours would then be invisible; start over.
            match std::fs::metadata(&lock_path) {
                Ok(m) if m.ino() == lock.metadata()?.ino() => {}
                _ => continue,
            }
            let path = root.join(&name);
            DirBuilder::new().mode(DIR_MODE).create(&path)?;
            return Ok((SpoolDir { path, _lock: lock }, swept));
        }
    }

    /// Where this instance's spool files go (removed when it stops).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates the spool file `name` (a new file, 0600) for writing; its
    /// path and the open file. The caller removes it when done.
    pub async fn create_file(&self, name: &str) -> io::Result<(PathBuf, tokio::fs::File)> {
        let path = self.path.join(name);
        let file = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(FILE_MODE)
            .open(&path)
            .await?;
        Ok((path, file))
    }
}

/// A request's file in the spool (under [`SpoolDir::path`]), removed
/// when dropped, however the request ends.
pub struct SpoolFile {
    pub path: PathBuf,
}

impl Drop for SpoolFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `Ok` for an entry already gone (another instance sweeping at the same
/// time).
fn gone_ok(r: io::Result<()>) -> io::Result<()> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Removes every spool entry no live instance holds; how many.
fn sweep(root: &Path) -> io::Result<usize> {
    let mut swept = 0;
    for entry in std::fs::read_dir(root)? {
        let Ok(entry) = entry else { continue };
        let path = entry.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
            continue;
        };
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if let Some(owner) = name.strip_suffix(".lock") {
            let Ok(lock) = OpenOptions::new().write(true).open(&path) else {
                continue;
            };
            if try_lock(&lock)? {
                let dir = root.join(owner);
                if dir.exists() {
                    gone_ok(std::fs::remove_dir_all(&dir))?;
                    swept += 1;
                }
                gone_ok(std::fs::remove_file(&path))?;
            }
        } else if kind.is_dir() {
            // A directory whose lock file is gone: its owner's lock was
            // taken (and the file removed) by an earlier sweep that was
            // cut short.
            if !root.join(format!("{name}.lock")).exists() {
                gone_ok(std::fs::remove_dir_all(&path))?;
                swept += 1;
            }
        } else {
            gone_ok(std::fs::remove_file(&path))?;
            swept += 1;
        }
    }
    Ok(swept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_instances_spool_is_kept_and_a_dead_ones_swept() {
        let dir = std::env::temp_dir().join(format!("spool-test-{}", rand::random::<u64>()));
        let (a, swept) = SpoolDir::open(&dir).unwrap();
        assert_eq!(swept, 0);
        std::fs::write(a.path().join("stt-1"), b"x").unwrap();
        let root = dir.join("spool");
        // The owner's only: directories 0700, the lock file 0600.
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&root), DIR_MODE);
        assert_eq!(mode(a.path()), DIR_MODE);
        assert_eq!(mode(&a.path().with_extension("lock")), FILE_MODE);
        std::fs::write(root.join("stt-old"), b"x").unwrap();
        // A dead instance: its lock file held by nobody.
        std::fs::create_dir(root.join("1-dead")).unwrap();
        std::fs::write(root.join("1-dead").join("stt-2"), b"x").unwrap();
        std::fs::write(root.join("1-dead.lock"), b"").unwrap();
        // Another instance: `a` is alive, its file stays; the others go.
        let (b, swept) = SpoolDir::open(&dir).unwrap();
        assert_eq!(swept, 2);
        assert!(a.path().join("stt-1").exists());
        assert!(!root.join("1-dead").exists() && !root.join("1-dead.lock").exists());
        // A spooled file is 0600 and new (an existing name is refused).
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (path, _file) = rt.block_on(b.create_file("stt-3")).unwrap();
        assert_eq!(mode(&path), FILE_MODE);
        assert!(rt.block_on(b.create_file("stt-3")).is_err());
        // A clean stop removes its own directory.
        let a_path = a.path().to_owned();
        drop(a);
        assert!(!a_path.exists());
        assert!(b.path().exists());
        drop(b);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
