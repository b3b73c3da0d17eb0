//! This instance's identity and lease (see `store::instances` for what the
//! database keeps).
//!
//! The id survives restarts, so that an instance restarted after a crash
//! (`kill -9`) finds and releases the credit holds of its previous run. It
//! is `GATEWAY_INSTANCE_ID` when set; otherwise the id kept in the file
//! `instance-id` of the data directory, made on first start (a random
//! `gw-` + 16 hex digits). The running process holds an exclusive lock on
//! that file, released by the kernel when it ends, however it ends: a
//! second process on the same data directory finds it locked and takes
//! `instance-id.1` (and so on), so two live processes never share an id,
//! while a restarted one takes its own back.
//!
//! The lease (`GATEWAY_INSTANCE_LEASE_SECS`, default 120 s) is renewed
//! every third of its length by [`keep_lease`]; the holds of an instance
//! that stopped renewing count no more once it lapses.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::Path;
use std::time::Duration;

use gateway_store::{Instances, Store};

/// The file keeping the instance id in the data directory.
pub const INSTANCE_ID_FILE: &str = "instance-id";

/// How many files (`instance-id`, `instance-id.1`, …) are tried.
const MAX_SLOTS: usize = 64;

/// This instance's id, and the lock that keeps it its own.
pub struct Identity {
    pub id: String,
    _lock: Option<File>,
}

impl Identity {
    /// The configured id, or the first unlocked id file of `data_dir`
    /// (created, 0600, with a fresh id when missing or empty).
    pub fn of(configured: Option<&str>, data_dir: &Path) -> std::io::Result<Identity> {
        if let Some(id) = configured {
            return Ok(Identity {
                id: id.to_owned(),
                _lock: None,
            });
        }
        gateway_store::create_private_dir(data_dir)?;
        for slot in 0..MAX_SLOTS {
            let name = match slot {
                0 => INSTANCE_ID_FILE.to_owned(),
                n => format!("{INSTANCE_ID_FILE}.{n}"),
            };
            let mut open = OpenOptions::new();
            open.read(true).write(true).create(true).truncate(false);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut open, 0o600);
            let mut file = open.open(data_dir.join(&name))?;
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => continue,
                Err(std::fs::TryLockError::Error(e)) => return Err(e),
            }
            let mut id = String::new();
            file.read_to_string(&mut id)?;
            let mut id = id.trim().to_owned();
            if id.is_empty() {
                id = format!("gw-{:016x}", rand::random::<u64>());
                file.set_len(0)?;
                file.rewind()?;
                file.write_all(format!("{id}\n").as_bytes())?;
                file.sync_all()?;
            }
            return Ok(Identity {
                id,
                _lock: Some(file),
            });
        }
        Err(std::io::Error::other(format!(
            "every {INSTANCE_ID_FILE} file of {} is locked by a running process",
            data_dir.display()
        )))
    }
}

/// Renews the lease (`lease` long) of `identity` every third of its
/// length while the instance runs (started by `server::start` after
/// `Store::start_instance`; the identity, and its lock, live as long as
/// this task). A failed renewal (the database unreachable) is retried at
/// the next beat.
pub async fn keep_lease(store: Store, identity: Identity, lease: Duration) {
    let mut beat = tokio::time::interval((lease / 3).max(Duration::from_millis(100)));
    beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    beat.tick().await;
    loop {
        beat.tick().await;
        let id = identity.id.clone();
        if let Err(e) = store
            .blocking(move |s| s.renew_instance_lease(&id, lease))
            .await
        {
            tracing::warn!(error = %e, "renewing the instance lease failed");
        }
    }
}

/// `GATEWAY_INSTANCE_ID`: 1 to 64 letters, digits, `.`, `_` or `-`.
pub(crate) fn parse_id(v: &str) -> Result<String, String> {
    let id = v.trim();
    let ok = !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(id.to_owned())
    } else {
        Err(format!("{v:?}: 1 to 64 letters, digits, '.', '_' or '-'"))
    }
}

/// `GATEWAY_INSTANCE_LEASE_SECS`: whole seconds, at least 3.
pub(crate) fn parse_lease(v: &str) -> Result<Duration, String> {
    match v.trim().parse::<u64>() {
        Ok(n) if n >= 3 => Ok(Duration::from_secs(n)),
        Ok(_) => Err("must be at least 3 (seconds)".into()),
        Err(e) => Err(format!("{v:?}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_survives_restarts_and_two_live_processes_never_share_one() {
        let dir = std::env::temp_dir().join(format!("rt-instance-{}", rand::random::<u64>()));
        let first = Identity::of(None, &dir).unwrap();
        assert!(first.id.starts_with("gw-"), "{}", first.id);
        let second = Identity::of(None, &dir).unwrap();
        assert_ne!(first.id, second.id, "the first file is locked");
        let (a, b) = (first.id.clone(), second.id.clone());
        drop((first, second));
        assert_eq!(Identity::of(None, &dir).unwrap().id, a, "restarted");
        let configured = Identity::of(Some("node-1"), &dir).unwrap();
        assert_eq!(configured.id, "node-1");
        assert_ne!(a, b);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn ids_and_leases_are_checked() {
        assert_eq!(parse_id(" node-1.a_b ").unwrap(), "node-1.a_b");
        assert!(parse_id("").is_err() && parse_id("a b").is_err());
        assert!(parse_id(&"x".repeat(65)).is_err());
        assert_eq!(parse_lease("3").unwrap(), Duration::from_secs(3));
        assert!(parse_lease("2").is_err() && parse_lease("soon").is_err());
    }
}
