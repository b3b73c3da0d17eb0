//! Secrets the gateway generates once and keeps in its data directory (the
//! object-signing key, the JWT secret): hex in a file of mode 0600, in a
//! directory of mode 0700.

use std::path::Path;

/// Reads the secret file at `path` (hex), creating it with 32 random bytes
/// when it does not exist yet. A secret shorter than `min_len` bytes is an
/// error. The error names the file and what failed.
pub fn load_or_create(path: &Path, min_len: usize) -> Result<Vec<u8>, String> {
    let fail = |what: &str, e: &dyn std::fmt::Display| format!("{what} {}: {e}", path.display());
    let read = || -> Result<Vec<u8>, String> {
        let text = std::fs::read_to_string(path).map_err(|e| fail("reading", &e))?;
        let key = hex::decode(text.trim()).map_err(|e| fail("decoding", &e))?;
        if key.len() < min_len {
            return Err(fail(
                "checking",
                &format!("secret shorter than {min_len} bytes"),
            ));
        }
        Ok(key)
    };
    if path.exists() {
        return read();
    }
    if let Some(dir) = path.parent() {
        let mut b = std::fs::DirBuilder::new();
        b.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
        b.create(dir)
            .map_err(|e| fail("creating the directory of", &e))?;
    }
    let key: [u8; 32] = rand::random();
    // Written to a temporary file and linked into place: a reader never sees
    // a half-written secret, and if another process won the race, its secret
    // is the one kept.
    let tmp = path.with_extension(format!("tmp{}", hex::encode(rand::random::<[u8; 4]>())));
    {
        use std::io::Write;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&tmp).map_err(|e| fail("creating", &e))?;
        file.write_all(hex::encode(key).as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| fail("writing", &e))?;
    }
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(key.to_vec()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read(),
        Err(e) => Err(fail("creating", &e)),
    }
}
