//! `gateway backup --to DIR` and `gateway restore --from DIR`: the embedded
//! default (SQLite and the local object store) copied while it serves, and
//! put back while it is stopped.
//!
//! A backup is the database first — SQLite's online backup, one moment's
//! consistent copy — then the objects directory and the data directory's
//! own files (`jwt.key`, `signing.key`: tokens and presigned URLs stay
//! valid). An object is written before the records that name it are
//! committed, so every object a record of the copied database names was on
//! disk before the copy began (a packed object's pack is copied past its
//! offset), and the objects copy, made after, holds it (one deleted in
//! between — expired, or its account erased — is the exception, and its
//! record says deleted soon after). The PostgreSQL + S3 setup is backed up
//! with PostgreSQL's and the bucket's own tools ([Backups](docs/operations.md#backups)).

use std::path::Path;

use runtime::config::Config;

type CliResult = Result<(), Box<dyn std::error::Error>>;

/// The copy of the database in a backup.
const DB: &str = "gateway.db";
/// The copy of the objects directory in a backup.
const OBJECTS: &str = runtime::objects::config::OBJECTS_DIR;
/// What a backup says of itself.
const MANIFEST: &str = "BACKUP.json";

/// `gateway backup --to DIR` (a new or empty directory).
pub fn backup(config: &Config, to: &Path) -> CliResult {
    if config.database_url.is_some() {
        return Err("GATEWAY_DATABASE_URL is PostgreSQL: back it up with pg_dump or base backups and WAL archiving, its objects with the bucket's versioning or replication (docs/operations.md#backups)".into());
    }
    if to.exists() && std::fs::read_dir(to)?.next().is_some() {
        return Err(format!("{} is not empty", to.display()).into());
    }
    runtime::store::create_private_dir(to)?;
    let started = chrono::Utc::now();
    runtime::store::backup_sqlite(&config.db_path, &to.join(DB))?;
    let local = matches!(
        config.objects.backend,
        runtime::objects::config::ObjectBackend::Local
    );
    let objects = match local {
        true => copy_tree(&config.data_dir.join(OBJECTS), &to.join(OBJECTS))?,
        false => 0,
    };
    copy_own_files(&config.data_dir, to)?;
    let manifest = serde_json::json!({
        "database": DB, "database_at": runtime::store::rfc3339(started),
        "objects": if local { serde_json::json!(objects) } else { serde_json::json!("in S3: not copied") },
    });
    std::fs::write(to.join(MANIFEST), manifest.to_string())?;
    println!(
        "backed up to {}: the database as of {}, {objects} object files",
        to.display(),
        runtime::store::rfc3339(started)
    );
    Ok(())
}

/// `gateway restore --from DIR` into the configured data directory, the
/// gateway stopped (refused while an instance serves from it; over an
/// existing database only with `--force`).
pub fn restore(config: &Config, from: &Path, force: bool) -> CliResult {
    if !from.join(MANIFEST).is_file() || !from.join(DB).is_file() {
        return Err(format!(
            "{} is not a backup (no {MANIFEST} and {DB})",
            from.display()
        )
        .into());
    }
    if config.database_url.is_some() {
        return Err("GATEWAY_DATABASE_URL is PostgreSQL: a backup of the embedded default restores into SQLite only".into());
    }
    let dir = &config.data_dir;
    if runtime::spool::in_use(dir)? {
        return Err(format!("a gateway serves from {}: stop it first", dir.display()).into());
    }
    if config.db_path.exists() && !force {
        return Err(format!("{} exists: --force replaces it", config.db_path.display()).into());
    }
    runtime::store::create_private_dir(dir)?;
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(dir.join(format!("{DB}{suffix}")));
    }
    std::fs::copy(from.join(DB), &config.db_path)?;
    let objects = match from.join(OBJECTS).is_dir() {
        true => copy_tree(&from.join(OBJECTS), &dir.join(OBJECTS))?,
        false => 0,
    };
    copy_own_files(from, dir)?;
    println!(
        "restored into {}: the database and {objects} object files",
        dir.display()
    );
    Ok(())
}

/// The regular files directly under `from` that are the data directory's
/// own (keys), copied to `to`; the database and backup files are not.
fn copy_own_files(from: &Path, to: &Path) -> std::io::Result<()> {
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if e.file_type()?.is_file() && name.ends_with(".key") {
            copy_private(&e.path(), &to.join(&name))?;
        }
    }
    Ok(())
}

/// `from` copied into `to` (directories made, files replaced), the local
/// store's `.tmp` left out: how many files.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<u64> {
    if !from.is_dir() {
        return Ok(0);
    }
    runtime::store::create_private_dir(to)?;
    let mut n = 0;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let (path, name) = (e.path(), e.file_name());
        if e.file_type()?.is_dir() {
            if name != ".tmp" {
                n += copy_tree(&path, &to.join(&name))?;
            }
        } else if e.file_type()?.is_file() {
            copy_private(&path, &to.join(&name))?;
            n += 1;
        }
    }
    Ok(n)
}

/// A file copied, owner-only.
fn copy_private(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::copy(from, to)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o600))
}
