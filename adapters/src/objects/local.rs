//! The local-filesystem store: the embedded default.
//!
//! # Layout
//!
//! An object `a/b/c.mp3` is the file `<root>/a/b/c.mp3`. Its first line is a
//! small header holding the content type given to `put`
//! (`gwobj1 audio/mpeg\n`); the object's bytes follow. Keeping the content
//! type inside the file makes a put one atomic rename (no sidecar that could
//! disagree with its object) and a delete one unlink.
//!
//! A put streams into `<root>/.tmp/<random>.part`, counting bytes; over the
//! limit, or when the body fails, the temporary file is removed and nothing
//! changes under the key (an object already there stays as it was). On
//! success the file is fsynced and renamed into place, and its directory
//! fsynced. Keys never start a segment with `.` ([`validate_key`]), so the
//! store's own `.tmp` cannot collide with an object.
//!
//! Small expiring objects stored through [`LocalStore::append_packed`]
//! (synthesis and speech audio) are not files of their own: they are
//! appended to a shared segment under `<root>/.packs` (see [`super::pack`]),
//! and found again through the database's asset records (the store's
//! locator, [`LocalStore::set_locator`]). Every read (`open`, `exists`)
//! tries the object's file first, then the locator.
//!
//! Presigned URLs are the gateway's own:
//! `{public_base_url}/objects/{key}?expires={unix}&signature={hex hmac}`
//! (see [`super::signing`]), answered by [`super::serve_presigned`].

use std::io::SeekFrom;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

use super::pack::{self, Appended, Locator, PackWriter};
use super::signing;
use super::types::{check_content_type, validate_key, ByteStream, ObjectError, ObjectMeta};

/// First bytes of every stored file; the content type and `\n` follow.
const MAGIC: &[u8] = b"gwobj1 ";
/// Largest write handed to the blocking pool at once (see `put_inner`).
const WRITE_BUF: usize = 256 * 1024;
/// Longest header accepted when reading (magic + 255-byte type + newline fits).
const MAX_HEADER: usize = 512;
/// Chunk size of streamed reads.
const READ_CHUNK: usize = 64 * 1024;
/// Name of the directory holding in-progress puts, under the root.
const TMP_DIR: &str = ".tmp";
/// Temporary files older than this are left-overs of a crash, removed at start.
const STALE_TMP: Duration = Duration::from_secs(24 * 3600);

/// Characters escaped in one key segment of a presigned URL: everything but
/// the RFC 3986 unreserved set.
pub(crate) const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Objects as files under a root directory, with gateway-signed URLs.
pub struct LocalStore {
    root: PathBuf,
    tmp: PathBuf,
    pub(super) public_base_url: String,
    signing_key: Vec<u8>,
    /// The appender of packed objects.
    packs: PackWriter,
    /// Finds packed objects (set once the database is open).
    locator: OnceLock<Locator>,
}

impl std::fmt::Debug for LocalStore {
    // Hand-written so that the signing key never reaches a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalStore")
            .field("root", &self.root)
            .field("public_base_url", &self.public_base_url)
            .finish_non_exhaustive()
    }
}

/// An object file opened for reading, header parsed.
pub(crate) struct OpenObject {
    pub(crate) file: tokio::fs::File,
    /// Where the object's bytes start in the file.
    pub(crate) header_len: u64,
    pub(crate) meta: ObjectMeta,
}

impl OpenObject {
    /// Streams the inclusive byte range `start..=end` of the object.
    pub(crate) async fn stream(mut self, start: u64, end: u64) -> Result<ByteStream, ObjectError> {
        self.file
            .seek(SeekFrom::Start(self.header_len + start))
            .await
            .map_err(backend)?;
        let len = end + 1 - start;
        Ok(Box::pin(tokio_util::io::ReaderStream::with_capacity(
            self.file.take(len),
            READ_CHUNK,
        )))
    }

    /// An empty object has no byte to stream.
    pub(crate) fn empty_stream() -> ByteStream {
        Box::pin(futures_util::stream::empty())
    }
}

pub(super) fn backend(e: impl std::fmt::Display) -> ObjectError {
    ObjectError::Backend(e.to_string())
}

/// A write that failed: [`ObjectError::Unavailable`] when the disk is full
/// (see [`pack::io_error`]).
fn disk(e: std::io::Error) -> ObjectError {
    super::pack::io_error("writing an object".into(), e)
}

/// Removes a temporary file when dropped, unless disarmed: covers errors and
/// a put future dropped half-way.
struct TempGuard(Option<PathBuf>);

impl Drop for TempGuard {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl LocalStore {
    /// A store under `root` (created if missing). Presigned URLs start with
    /// `public_base_url` (the gateway's external URL, e.g.
    /// `https://gw.example.com`; `/objects/...` is appended) and are signed
    /// with `signing_key`.
    ///
    /// Temporary files left by a crash more than a day ago are removed.
    pub fn new(
        root: PathBuf,
        public_base_url: String,
        signing_key: Vec<u8>,
    ) -> Result<LocalStore, ObjectError> {
        if signing_key.is_empty() {
            return Err(ObjectError::Backend("empty signing key".into()));
        }
        let tmp = root.join(TMP_DIR);
        // The store's root is the owner's only (0700), like the data directory.
        private_dir(&root).map_err(|e| backend(format!("creating {}: {e}", root.display())))?;
        private_dir(&tmp).map_err(|e| backend(format!("creating {}: {e}", tmp.display())))?;
        let packs = root.join(pack::PACKS_DIR);
        private_dir(&packs).map_err(|e| backend(format!("creating {}: {e}", packs.display())))?;
        if let Ok(entries) = std::fs::read_dir(&tmp) {
            for entry in entries.flatten() {
                let stale = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > STALE_TMP);
                if stale {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        let public_base_url = public_base_url.trim_end_matches('/').to_owned();
        Ok(LocalStore {
            root,
            tmp,
            public_base_url,
            signing_key,
            packs: PackWriter::new(packs, true),
            locator: OnceLock::new(),
        })
    }

    /// Whether packed objects must be fsynced before their asset record
    /// commits (`GATEWAY_DB_SYNC=full`, the default: [`Appended::sync`] is
    /// set) or not (`normal`).
    pub fn with_sync_full(mut self, sync_full: bool) -> LocalStore {
        self.packs.set_sync_full(sync_full);
        self
    }

    /// Sets how packed objects are found (once; later calls are ignored).
    pub fn set_locator(&self, locator: Locator) {
        let _ = self.locator.set(locator);
    }

    /// The directory of packed segments (`<root>/.packs`).
    pub fn packs_dir(&self) -> &Path {
        self.packs.dir()
    }

    /// The segment this process is appending to (never collected by its
    /// own sweeper), if any.
    pub fn active_segment(&self) -> Option<String> {
        self.packs.active()
    }

    /// Appends a small object (at most [`pack::MAX_PACKED_OBJECT`] bytes) to
    /// the active segment: one `write` on the calling thread. The object is
    /// readable once an asset record holding the returned location commits
    /// (and, under `full`, after [`Appended::sync`] is fdatasynced).
    pub fn append_packed(
        &self,
        key: &str,
        content_type: &str,
        body: &[u8],
    ) -> Result<Appended, ObjectError> {
        validate_key(key)?;
        let content_type = check_content_type(content_type)?;
        if body.len() as u64 > pack::MAX_PACKED_OBJECT {
            return Err(ObjectError::TooLarge {
                limit: pack::MAX_PACKED_OBJECT,
            });
        }
        self.packs.append(key, content_type, body)
    }

    /// Opens a packed object through the locator.
    pub(super) async fn open_packed(&self, key: &str) -> Result<OpenObject, ObjectError> {
        let Some(locator) = self.locator.get() else {
            return Err(ObjectError::NotFound);
        };
        let Some(p) = locator(key.to_owned()).await? else {
            return Err(ObjectError::NotFound);
        };
        let path = pack::segment_path(self.packs.dir(), &p.pack)
            .ok_or_else(|| backend(format!("object {key}: bad segment name {:?}", p.pack)))?;
        let file = match tokio::fs::File::open(&path).await {
            Ok(f) => f,
            Err(e) if is_not_found(&e) => return Err(ObjectError::NotFound),
            Err(e) => return Err(backend(format!("opening {}: {e}", p.pack))),
        };
        let len = file.metadata().await.map_err(backend)?.len();
        if len < p.offset.saturating_add(p.size) {
            return Err(backend(format!(
                "object {key}: segment {} is truncated",
                p.pack
            )));
        }
        Ok(OpenObject {
            file,
            header_len: p.offset,
            meta: ObjectMeta {
                size: p.size,
                content_type: p.content_type,
            },
        })
    }

    /// The directory objects live under.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The key presigned URLs are signed with.
    pub(crate) fn signing_key(&self) -> &[u8] {
        &self.signing_key
    }

    /// A presigned URL for `key` valid until `expires` (Unix seconds).
    pub fn presign_until(&self, key: &str, expires: u64) -> Result<String, ObjectError> {
        validate_key(key)?;
        let path: Vec<String> = key
            .split('/')
            .map(|s| utf8_percent_encode(s, SEGMENT).to_string())
            .collect();
        Ok(format!(
            "{}/objects/{}?expires={}&signature={}",
            self.public_base_url,
            path.join("/"),
            expires,
            signing::sign(&self.signing_key, key, expires)
        ))
    }

    pub(super) fn path_of(&self, key: &str) -> Result<PathBuf, ObjectError> {
        validate_key(key)?;
        Ok(self.root.join(key))
    }

    /// Opens `key` (its file, else a packed object) and reads its header.
    /// [`ObjectError::NotFound`] when absent.
    pub(crate) async fn open(&self, key: &str) -> Result<OpenObject, ObjectError> {
        let path = self.path_of(key)?;
        let mut file = match tokio::fs::File::open(&path).await {
            Ok(f) => f,
            Err(e) if is_not_found(&e) => return self.open_packed(key).await,
            Err(e) => return Err(backend(format!("opening {key}: {e}"))),
        };
        let file_meta = file.metadata().await.map_err(backend)?;
        if !file_meta.is_file() {
            // A directory: a prefix of other keys, not an object.
            return self.open_packed(key).await;
        }
        let file_len = file_meta.len();
        let mut buf = Vec::with_capacity(MAX_HEADER);
        let corrupt = || ObjectError::Backend(format!("object {key}: missing or corrupt header"));
        let newline = loop {
            if let Some(i) = buf.iter().position(|&b| b == b'\n') {
                break i;
            }
            if buf.len() >= MAX_HEADER {
                return Err(corrupt());
            }
            let mut chunk = [0u8; MAX_HEADER];
            let want = MAX_HEADER - buf.len();
            let n = file.read(&mut chunk[..want]).await.map_err(backend)?;
            if n == 0 {
                return Err(corrupt());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let line = &buf[..newline];
        let content_type = line
            .strip_prefix(MAGIC)
            .and_then(|ct| std::str::from_utf8(ct).ok())
            .ok_or_else(corrupt)?
            .to_owned();
        let header_len = newline as u64 + 1;
        Ok(OpenObject {
            file,
            header_len,
            meta: ObjectMeta {
                size: file_len - header_len,
                content_type,
            },
        })
    }

    pub(super) async fn put_inner(
        &self,
        key: &str,
        content_type: &str,
        mut body: ByteStream,
        max_bytes: Option<u64>,
    ) -> Result<u64, ObjectError> {
        let final_path = self.path_of(key)?;
        let content_type = check_content_type(content_type)?;
        let tmp_path = self
            .tmp
            .join(format!("{}.part", hex::encode(rand::random::<[u8; 16]>())));
        let mut guard = TempGuard(Some(tmp_path.clone()));
        let mut options = tokio::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        options.mode(OBJECT_MODE);
        let mut file = options
            .open(&tmp_path)
            .await
            .map_err(|e| backend(format!("creating {}: {e}", tmp_path.display())))?;
        // tokio copies each write into a buffer of up to 2 MiB by default;
        // keep it to one network chunk's size so memory stays flat.
        file.set_max_buf_size(WRITE_BUF);
        let mut header = Vec::with_capacity(MAGIC.len() + content_type.len() + 1);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(content_type.as_bytes());
        header.push(b'\n');
        file.write_all(&header).await.map_err(disk)?;

        let mut size: u64 = 0;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(ObjectError::Body)?;
            size += chunk.len() as u64;
            if let Some(limit) = max_bytes {
                if size > limit {
                    return Err(ObjectError::TooLarge { limit });
                }
            }
            file.write_all(&chunk).await.map_err(disk)?;
        }
        file.flush().await.map_err(disk)?;
        file.sync_all().await.map_err(disk)?;
        drop(file);

        self.move_into(&tmp_path, &final_path, key)
            .await
            .map_err(|e| backend(format!("storing {key}: {e}")))?;
        guard.0 = None;
        Ok(size)
    }

    /// [`ObjectStore::put_bytes`], in one blocking call: the body is written
    /// straight under its key (created exclusively; nobody can hold a URL of
    /// it before this returns), fsynced with its directory entry. A failed
    /// write removes what it wrote. Used for synthesis audio, where every key
    /// is new (it holds the request id); an existing key is an error, never
    /// overwritten.
    pub(super) async fn put_bytes_inner(
        &self,
        key: &str,
        content_type: &str,
        body: Bytes,
    ) -> Result<u64, ObjectError> {
        use std::io::Write;
        let final_path = self.path_of(key)?;
        let content_type = check_content_type(content_type)?.to_owned();
        let root = self.root.clone();
        let written = tokio::task::spawn_blocking(move || -> Result<Option<u64>, ObjectError> {
            let parent = final_path.parent().unwrap_or(&root).to_path_buf();
            private_dir(&parent).map_err(disk)?;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, OBJECT_MODE);
            let mut file = match options.open(&final_path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(None),
                Err(e) => return Err(backend(format!("creating {}: {e}", final_path.display()))),
            };
            let mut guard = TempGuard(Some(final_path.clone()));
            file.write_all(MAGIC).map_err(disk)?;
            file.write_all(content_type.as_bytes()).map_err(disk)?;
            file.write_all(b"\n").map_err(disk)?;
            file.write_all(&body).map_err(disk)?;
            file.sync_all().map_err(disk)?;
            guard.0 = None;
            // Make the new directory entry durable; best effort (some filesystems refuse).
            let _ = std::fs::File::open(&parent).and_then(|d| d.sync_all());
            Ok(Some(body.len() as u64))
        })
        .await
        .map_err(|e| backend(format!("blocking task: {e}")))??;
        match written {
            Some(n) => Ok(n),
            None => Err(ObjectError::Backend(format!("{key} exists already"))),
        }
    }

    /// Renames `from` into `to` (a file, or another object), creating `to`'s
    /// directory; a concurrent delete may prune that directory between
    /// creating it and renaming into it, hence the retries.
    async fn move_into(&self, from: &Path, to: &Path, key: &str) -> Result<(), std::io::Error> {
        let parent = to.parent().unwrap_or(&self.root).to_path_buf();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut dirs = tokio::fs::DirBuilder::new();
            dirs.recursive(true);
            #[cfg(unix)]
            dirs.mode(0o700);
            dirs.create(&parent).await?;
            match tokio::fs::rename(from, to).await {
                Ok(()) => break,
                Err(e)
                    if is_not_found(&e)
                        && attempt < 5
                        && tokio::fs::metadata(from).await.is_ok() =>
                {
                    continue
                }
                Err(e) => return Err(e),
            }
        }
        // Make the rename durable; best effort (some filesystems refuse).
        let _ = tokio::task::spawn_blocking(move || {
            std::fs::File::open(parent).and_then(|d| d.sync_all())
        })
        .await;
        tracing::trace!(key, "object stored");
        Ok(())
    }

    /// Removes the directories above `path` left empty (keys are
    /// date-partitioned, so they would pile up). `remove_dir` fails on a
    /// non-empty one, which stops it.
    async fn prune(&self, path: &Path) {
        let mut dir = path.parent();
        while let Some(d) = dir {
            if d == self.root
                || !d.starts_with(&self.root)
                || tokio::fs::remove_dir(d).await.is_err()
            {
                break;
            }
            dir = d.parent();
        }
    }

    pub(super) async fn delete_inner(&self, key: &str) -> Result<(), ObjectError> {
        let path = self.path_of(key)?;
        match tokio::fs::remove_file(&path).await {
            Ok(()) => {}
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) => return Err(backend(format!("deleting {key}: {e}"))),
        }
        self.prune(&path).await;
        Ok(())
    }

    pub(super) async fn rename_inner(&self, from: &str, to: &str) -> Result<(), ObjectError> {
        let (from_path, to_path) = (self.path_of(from)?, self.path_of(to)?);
        if from == to {
            return self.open(from).await.map(|_| ());
        }
        match tokio::fs::metadata(&from_path).await {
            Ok(m) if m.is_file() => {}
            Ok(_) => return Err(ObjectError::NotFound),
            Err(e) if is_not_found(&e) => return Err(ObjectError::NotFound),
            Err(e) => return Err(backend(format!("renaming {from}: {e}"))),
        }
        match self.move_into(&from_path, &to_path, to).await {
            Ok(()) => {}
            Err(e) if is_not_found(&e) => return Err(ObjectError::NotFound),
            Err(e) => return Err(backend(format!("renaming {from} to {to}: {e}"))),
        }
        self.prune(&from_path).await;
        Ok(())
    }
}

pub(super) fn is_not_found(e: &std::io::Error) -> bool {
    // NotADirectory: a key below an existing object ("a" is a file, "a/b" asked).
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}

/// Mode of an object's file (Unix): the owner's only, whatever the umask.
const OBJECT_MODE: u32 = 0o600;

/// Creates `dir` and missing parents with mode 0700 (Unix); an existing
/// directory keeps its mode.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(dir)
}
