//! Packed segments: small expiring objects of the local store appended to a
//! shared file instead of one file each.
//!
//! # Why
//!
//! Synthesis and speech audio (tens of KB, always expiring) used to be one
//! file each, created, fsynced and its directory fsynced in a blocking-pool
//! task: about 40 % of a billed synthesis request's CPU. A packed object is
//! one `write` into the page cache on the calling thread; its fsync is
//! shared with the database's group commit (below).
//!
//! # Layout
//!
//! Segments are `<objects root>/.packs/<name>.pack` (`.`-names are never
//! keys, see [`super::validate_key`], so `.packs` is never served). A
//! segment is a sequence of records, each a header then the body:
//!
//! ```text
//! magic  b"gwpk" + version 1         5 bytes
//! key length (u16 LE), key           2 + n bytes (UTF-8)
//! content type length (u8), type     1 + n bytes
//! body length (u64 LE)               8 bytes
//! CRC32 of the body (u32 LE)         4 bytes
//! body
//! ```
//!
//! so a segment can be inspected or recovered offline ([`read_records`]).
//! Reads never scan: the asset record in the database holds the segment's
//! name and the body's offset (`assets.pack`, `assets.pack_offset`), and the
//! store's locator looks them up by key.
//!
//! # Writing
//!
//! One active segment per process, behind a `std::sync::Mutex`: an append
//! is one `write` of header and body under the lock, on the caller's thread
//! (no blocking-pool hand-off: it only copies into the page cache). A new
//! segment is started when the active one would pass [`SEGMENT_MAX`] bytes,
//! when it is older than [`SEGMENT_MAX_AGE`] (checked at append), and after
//! any write error (a possibly torn tail is never appended to). Creating a
//! segment (exclusively, mode 0600) fsyncs its directory: a rare cost on
//! the request path (once per 64 MiB or 10 minutes).
//!
//! # Durability
//!
//! Under `GATEWAY_DB_SYNC=full` an append returns the segment's file, which
//! the caller sends to the group-commit writer beside the asset record
//! ([`gateway_store::Record::SyncFile`]): the writer fdatasyncs each file of
//! a group once before committing, so an answered object survives a power
//! cut; a failed fdatasync fails those batches (nothing committed). Under
//! `normal` nothing is synced: the page cache survives the process being
//! killed, as the database's WAL does.
//!
//! # Collection
//!
//! The retention sweeper marks expired packed assets deleted (which makes
//! them unreadable: the locator only sees live rows), then removes the
//! segments that no live asset references and whose mtime is over a day
//! old ([`collectable_segments`]). A segment being filled is written at
//! least every 10 minutes or rotated, so it is always young: a sweep in
//! another process (`gateway sweep` beside `serve`) never removes it.

use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::types::ObjectError;

/// Name of the directory holding segments, under the store's root.
pub const PACKS_DIR: &str = ".packs";
/// File name suffix of a segment.
pub const PACK_SUFFIX: &str = ".pack";
/// Largest object packed; bigger ones are files of their own.
pub const MAX_PACKED_OBJECT: u64 = 1024 * 1024;
/// A segment is not grown past this size (a new one is started).
pub const SEGMENT_MAX: u64 = 64 * 1024 * 1024;
/// A segment older than this gets no more appends.
pub const SEGMENT_MAX_AGE: Duration = Duration::from_secs(600);
/// A segment no live asset references is removed once its mtime is this old.
pub const SEGMENT_MIN_IDLE: Duration = Duration::from_secs(24 * 3600);

/// First bytes of every record: magic and format version.
const RECORD_MAGIC: &[u8; 5] = b"gwpk\x01";

/// Where a packed object's bytes are (from its asset record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packed {
    /// Segment file name (`<name>.pack`, under [`PACKS_DIR`]).
    pub pack: String,
    /// Offset of the body in the segment.
    pub offset: u64,
    pub size: u64,
    pub content_type: String,
}

/// Finds a packed object by key (the database's asset records); `Ok(None)`
/// when no live asset holds it packed.
pub type Locator = Arc<
    dyn Fn(String) -> futures_util::future::BoxFuture<'static, Result<Option<Packed>, ObjectError>>
        + Send
        + Sync,
>;

/// What an append produced.
#[derive(Debug)]
pub struct Appended {
    /// Segment file name, for the asset record.
    pub pack: String,
    /// Offset of the body, for the asset record.
    pub offset: u64,
    /// The segment to fdatasync before the asset record commits
    /// (`GATEWAY_DB_SYNC=full`); `None` under `normal`.
    pub sync: Option<Arc<std::fs::File>>,
}

struct Active {
    name: String,
    file: Arc<std::fs::File>,
    len: u64,
    opened: Instant,
}

/// The process's appender to its active segment.
pub(crate) struct PackWriter {
    dir: PathBuf,
    sync_full: bool,
    active: Mutex<Option<Active>>,
}

impl PackWriter {
    pub(crate) fn new(dir: PathBuf, sync_full: bool) -> PackWriter {
        PackWriter {
            dir,
            sync_full,
            active: Mutex::new(None),
        }
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The name of the segment this process appends to, if any.
    pub(crate) fn active(&self) -> Option<String> {
        let active = self.active.lock().unwrap_or_else(|p| p.into_inner());
        active.as_ref().map(|a| a.name.clone())
    }

    pub(crate) fn set_sync_full(&mut self, sync_full: bool) {
        self.sync_full = sync_full;
    }

    /// Appends one record (see the module docs); `content_type` is already checked.
    pub(crate) fn append(
        &self,
        key: &str,
        content_type: &str,
        body: &[u8],
    ) -> Result<Appended, ObjectError> {
        let record = encode_record(key, content_type, body)?;
        let header_len = (record.len() - body.len()) as u64;
        let mut active = self.active.lock().unwrap_or_else(|p| p.into_inner());
        let stale = active.as_ref().is_none_or(|a| {
            (a.len > 0 && a.len + record.len() as u64 > SEGMENT_MAX)
                || a.opened.elapsed() >= SEGMENT_MAX_AGE
        });
        if stale {
            *active = None;
            *active = Some(self.create_segment()?);
        }
        let seg = active.as_mut().expect("an active segment");
        // The file is opened for appending: the record lands at the end,
        // which the position after the write tells (one cheap `lseek`).
        let written = (&*seg.file)
            .write_all(&record)
            .and_then(|()| (&*seg.file).stream_position());
        let end = match written {
            Ok(end) => end,
            Err(e) => {
                // The tail may be torn: the next append starts a new segment.
                let name = seg.name.clone();
                *active = None;
                return Err(io_error(format!("appending to segment {name}"), e));
            }
        };
        let start = end - record.len() as u64;
        let appended = Appended {
            pack: seg.name.clone(),
            offset: start + header_len,
            sync: self.sync_full.then(|| seg.file.clone()),
        };
        if start == seg.len {
            seg.len = end;
        } else {
            // Someone else changed the file (truncated it, appended to it):
            // this record is where the position says, but the segment gets
            // no more appends.
            tracing::warn!(segment = %seg.name, expected = seg.len, found = start, "pack segment changed underneath; starting a new one");
            *active = None;
        }
        Ok(appended)
    }

    /// Creates a new segment exclusively (0600) and fsyncs its directory.
    fn create_segment(&self) -> Result<Active, ObjectError> {
        let name = format!(
            "{}-{}{PACK_SUFFIX}",
            chrono::Utc::now().format("%Y%m%dT%H%M%S"),
            hex::encode(rand::random::<[u8; 6]>())
        );
        let path = self.dir.join(&name);
        let mut options = std::fs::OpenOptions::new();
        options.append(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options
            .open(&path)
            .map_err(|e| io_error(format!("creating {}", path.display()), e))?;
        std::fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| ObjectError::Backend(format!("syncing {}: {e}", self.dir.display())))?;
        tracing::debug!(segment = %name, "new pack segment");
        Ok(Active {
            name,
            file: Arc::new(file),
            len: 0,
            opened: Instant::now(),
        })
    }
}

/// A record's header and body, in one buffer (one `write`).
fn encode_record(key: &str, content_type: &str, body: &[u8]) -> Result<Vec<u8>, ObjectError> {
    let key_len = u16::try_from(key.len())
        .map_err(|_| ObjectError::Backend(format!("key too long to pack: {key}")))?;
    let ct_len = u8::try_from(content_type.len())
        .map_err(|_| ObjectError::Backend("content type too long to pack".into()))?;
    let mut out = Vec::with_capacity(5 + 2 + key.len() + 1 + content_type.len() + 12 + body.len());
    out.extend_from_slice(RECORD_MAGIC);
    out.extend_from_slice(&key_len.to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    out.push(ct_len);
    out.extend_from_slice(content_type.as_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    out.extend_from_slice(body);
    Ok(out)
}

/// One record found in a segment by [`read_records`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordInfo {
    pub key: String,
    pub content_type: String,
    /// Offset of the body in the segment.
    pub offset: u64,
    pub size: u64,
    /// Whether the body's CRC32 matches its header's.
    pub crc_ok: bool,
}

/// Reads a segment's records in order, for inspection and offline
/// recovery. Stops at the end, or at the first record that is torn or
/// does not parse (a torn tail); what precedes it is returned.
pub fn read_records(path: &Path) -> std::io::Result<Vec<RecordInfo>> {
    let mut file = std::io::BufReader::new(std::fs::File::open(path)?);
    let mut out = Vec::new();
    let mut pos = 0u64;
    let mut body = Vec::new();
    loop {
        let Some(r) = read_one(&mut file, &mut pos, &mut body)? else {
            return Ok(out);
        };
        out.push(r);
    }
}

fn read_one(
    file: &mut impl Read,
    pos: &mut u64,
    body: &mut Vec<u8>,
) -> std::io::Result<Option<RecordInfo>> {
    let mut exact = |buf: &mut [u8], pos: &mut u64| -> std::io::Result<bool> {
        match file.read_exact(buf) {
            Ok(()) => {
                *pos += buf.len() as u64;
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
            Err(e) => Err(e),
        }
    };
    let mut magic = [0u8; 5];
    if !exact(&mut magic, pos)? || &magic != RECORD_MAGIC {
        return Ok(None);
    }
    let mut len2 = [0u8; 2];
    if !exact(&mut len2, pos)? {
        return Ok(None);
    }
    let mut key = vec![0u8; u16::from_le_bytes(len2) as usize];
    let mut len1 = [0u8; 1];
    if !exact(&mut key, pos)? || !exact(&mut len1, pos)? {
        return Ok(None);
    }
    let mut ct = vec![0u8; len1[0] as usize];
    let mut fixed = [0u8; 12];
    if !exact(&mut ct, pos)? || !exact(&mut fixed, pos)? {
        return Ok(None);
    }
    let size = u64::from_le_bytes(fixed[..8].try_into().expect("8 bytes"));
    let crc = u32::from_le_bytes(fixed[8..].try_into().expect("4 bytes"));
    let (Ok(key), Ok(content_type)) = (String::from_utf8(key), String::from_utf8(ct)) else {
        return Ok(None);
    };
    if size > SEGMENT_MAX {
        return Ok(None);
    }
    let offset = *pos;
    body.resize(size as usize, 0);
    if !exact(body, pos)? {
        return Ok(None);
    }
    Ok(Some(RecordInfo {
        key,
        content_type,
        offset,
        size,
        crc_ok: crc32fast::hash(body) == crc,
    }))
}

/// The segment file of a name from an asset record; `None` when the name
/// is not a plain segment name (never joined into a path then).
pub(crate) fn segment_path(dir: &Path, name: &str) -> Option<PathBuf> {
    let plain = name.ends_with(PACK_SUFFIX)
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    plain.then(|| dir.join(name))
}

/// The segments under `dir` that may be removed: not in `live` (the
/// segments live assets reference) and unmodified for [`SEGMENT_MIN_IDLE`].
pub fn collectable_segments(dir: &Path, live: &std::collections::HashSet<String>) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.ends_with(PACK_SUFFIX)
                && !live.contains(&name)
                && e.metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > SEGMENT_MIN_IDLE)
        })
        .map(|e| e.path())
        .collect()
}

/// A file-system failure while `what`: [`ObjectError::Unavailable`] when the
/// disk (or the quota) is full, since freeing space makes it work again;
/// else [`ObjectError::Backend`].
pub(crate) fn io_error(what: String, e: std::io::Error) -> ObjectError {
    use std::io::ErrorKind;
    match e.kind() {
        ErrorKind::StorageFull | ErrorKind::QuotaExceeded => {
            ObjectError::Unavailable(format!("{what}: {e}"))
        }
        _ => ObjectError::Backend(format!("{what}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer(dir: &Path, sync_full: bool) -> PackWriter {
        std::fs::create_dir_all(dir).unwrap();
        PackWriter::new(dir.to_path_buf(), sync_full)
    }

    fn segments(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn objects_pack_records_are_readable_offline() {
        let dir = super::super::tests::TempDir::new();
        let w = writer(dir.path(), true);
        let a = w.append("s/1/a.mp3", "audio/mpeg", b"hello").unwrap();
        let b = w.append("s/1/b.wav", "audio/wav", &[9u8; 1000]).unwrap();
        assert_eq!(a.pack, b.pack, "one active segment");
        assert!(
            a.sync.is_some(),
            "full: the segment is synced by the writer"
        );
        let path = dir.path().join(&a.pack);
        let records = read_records(&path).unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(
            (records[0].key.as_str(), records[0].content_type.as_str()),
            ("s/1/a.mp3", "audio/mpeg")
        );
        assert_eq!((records[0].offset, records[0].size), (a.offset, 5));
        assert_eq!((records[1].offset, records[1].size), (b.offset, 1000));
        assert!(records.iter().all(|r| r.crc_ok));
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[a.offset as usize..a.offset as usize + 5], b"hello");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // `normal`: nothing to sync.
        let w = writer(&dir.path().join("n"), false);
        assert!(w.append("k", "a/b", b"x").unwrap().sync.is_none());
        // A flipped body byte is caught by the CRC.
        let mut bytes = bytes;
        bytes[b.offset as usize] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let records = read_records(&path).unwrap();
        assert!(records[0].crc_ok && !records[1].crc_ok);
    }

    #[test]
    fn objects_pack_torn_tail_keeps_earlier_records_and_rotation() {
        let dir = super::super::tests::TempDir::new();
        let w = writer(dir.path(), false);
        let a = w.append("k/a", "t/a", b"first").unwrap();
        let b = w.append("k/b", "t/b", b"second record").unwrap();
        let path = dir.path().join(&a.pack);
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(b.offset + 3).unwrap();
        let records = read_records(&path).unwrap();
        assert_eq!(records.len(), 1, "the torn record is not listed");
        assert_eq!(records[0].key, "k/a");
        // Changed underneath: the record lands at the real end, then the
        // segment gets no more appends.
        let c = w.append("k/c", "t/c", b"third").unwrap();
        assert_eq!(
            (c.pack.as_str(), c.offset),
            (a.pack.as_str(), b.offset + 3 + 5 + 2 + 3 + 1 + 3 + 12)
        );
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[c.offset as usize..], b"third");
        let d = w.append("k/d", "t/d", b"fourth").unwrap();
        assert_ne!(d.pack, a.pack);
        // Too old: the next append rotates.
        w.active.lock().unwrap().as_mut().unwrap().opened =
            Instant::now() - SEGMENT_MAX_AGE - Duration::from_secs(1);
        let e = w.append("k/e", "t/e", b"fifth").unwrap();
        assert_ne!(e.pack, d.pack);
        // Full: the next append rotates.
        w.active.lock().unwrap().as_mut().unwrap().len = SEGMENT_MAX - 2;
        let f = w.append("k/f", "t/f", b"sixth").unwrap();
        assert_ne!(f.pack, e.pack);
        assert_eq!(segments(dir.path()).len(), 4);
        assert!(segment_path(dir.path(), &f.pack).is_some());
        assert!(segment_path(dir.path(), "../x.pack").is_none());
        assert!(segment_path(dir.path(), "a/b.pack").is_none());
        assert!(segment_path(dir.path(), "x.db").is_none());
    }

    #[test]
    fn objects_pack_collects_only_old_unreferenced_segments() {
        let dir = super::super::tests::TempDir::new();
        let w = writer(dir.path(), false);
        let a = w.append("k/a", "t/a", b"a").unwrap();
        w.active.lock().unwrap().as_mut().unwrap().len = SEGMENT_MAX;
        let b = w.append("k/b", "t/b", b"b").unwrap();
        let none = std::collections::HashSet::new();
        assert!(collectable_segments(dir.path(), &none).is_empty(), "young");
        let old = std::time::SystemTime::now() - SEGMENT_MIN_IDLE - Duration::from_secs(60);
        for name in [&a.pack, &b.pack] {
            let f = std::fs::File::options()
                .write(true)
                .open(dir.path().join(name))
                .unwrap();
            f.set_modified(old).unwrap();
        }
        let live: std::collections::HashSet<String> = [b.pack.clone()].into();
        assert_eq!(
            collectable_segments(dir.path(), &live),
            vec![dir.path().join(&a.pack)]
        );
    }
}
