//! Configuration of object storage: environment → [`ObjectConfig`], and
//! [`open`] to get the configured store.
//!
//! Like [`crate::config`], a value set in the environment wins over the
//! default listed beside its name, and a value that does not parse is an
//! error naming the variable.

use std::path::Path;
use std::sync::Arc;

use super::local::LocalStore;
use super::s3::{S3Config, S3Store, DEFAULT_REQUEST_TIMEOUT};
use super::store::ObjectStore;
use super::types::ObjectError;

/// Backend: `local` (default) or `s3`.
pub const GATEWAY_OBJECT_STORE: &str = "GATEWAY_OBJECT_STORE";
/// Key of the local store's presigned URLs: 64 hex digits (decoded to 32
/// bytes) or any other non-empty string (used as is). Default: the content
/// of `$GATEWAY_DATA_DIR/signing.key`, generated on first use, so that URLs
/// survive restarts.
pub const GATEWAY_SIGNING_KEY: &str = "GATEWAY_SIGNING_KEY";
/// S3 API base URL. Default `https://s3.<region>.amazonaws.com`.
pub const GATEWAY_S3_ENDPOINT: &str = "GATEWAY_S3_ENDPOINT";
/// S3 signing region. Default `us-east-1`.
pub const GATEWAY_S3_REGION: &str = "GATEWAY_S3_REGION";
/// S3 bucket. Required with `GATEWAY_OBJECT_STORE=s3`.
pub const GATEWAY_S3_BUCKET: &str = "GATEWAY_S3_BUCKET";
/// S3 access key id. Required with `GATEWAY_OBJECT_STORE=s3`.
pub const GATEWAY_S3_ACCESS_KEY: &str = "GATEWAY_S3_ACCESS_KEY";
/// S3 secret access key. Required with `GATEWAY_OBJECT_STORE=s3`.
pub const GATEWAY_S3_SECRET_KEY: &str = "GATEWAY_S3_SECRET_KEY";
/// Path-style addressing (`true`/`false`). Default true.
pub const GATEWAY_S3_PATH_STYLE: &str = "GATEWAY_S3_PATH_STYLE";
/// Seconds allowed to one S3 request (an upload's part, a head, the start
/// of a download) before it fails as unavailable. Default 60.
pub const GATEWAY_S3_TIMEOUT_SECS: &str = "GATEWAY_S3_TIMEOUT_SECS";

/// Default of [`GATEWAY_S3_REGION`].
pub const DEFAULT_S3_REGION: &str = "us-east-1";
/// File under the data directory holding the generated signing key.
pub const SIGNING_KEY_FILE: &str = "signing.key";
/// Directory under the data directory holding local objects.
pub const OBJECTS_DIR: &str = "objects";

/// Which backend, with its settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectBackend {
    /// Files under `$GATEWAY_DATA_DIR/objects`.
    Local,
    /// An S3 bucket.
    S3(S3Config),
}

/// Everything object storage reads from the environment.
#[derive(Clone, PartialEq, Eq)]
pub struct ObjectConfig {
    /// The backend.
    pub backend: ObjectBackend,
    /// `GATEWAY_SIGNING_KEY`, decoded; `None` means the key file.
    pub signing_key: Option<Vec<u8>>,
}

impl std::fmt::Debug for ObjectConfig {
    // Hand-written so that the signing key never reaches a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectConfig")
            .field("backend", &self.backend)
            .field("signing_key", &self.signing_key.as_ref().map(|_| "<set>"))
            .finish()
    }
}

impl Default for ObjectConfig {
    /// The local store with the key file.
    fn default() -> Self {
        ObjectConfig {
            backend: ObjectBackend::Local,
            signing_key: None,
        }
    }
}

impl ObjectConfig {
    /// Reads the configuration through `get` (e.g. `|k| std::env::var(k).ok()`).
    /// Empty values count as unset. The error lists every bad variable, each
    /// by its own name, with the reason.
    pub fn from_lookup(
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<ObjectConfig, Vec<(&'static str, String)>> {
        let get = |name: &str| {
            get(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let mut bad = Vec::new();
        let signing_key = get(GATEWAY_SIGNING_KEY).map(|v| decode_signing_key(&v));
        let backend = match get(GATEWAY_OBJECT_STORE).map(|v| v.to_ascii_lowercase()) {
            None => Some(ObjectBackend::Local),
            Some(v) if v == "local" => Some(ObjectBackend::Local),
            Some(v) if v == "s3" => s3_from_lookup(&get, &mut bad).map(ObjectBackend::S3),
            Some(other) => {
                bad.push((
                    GATEWAY_OBJECT_STORE,
                    format!("expected local or s3, got {other:?}"),
                ));
                None
            }
        };
        match backend {
            Some(backend) if bad.is_empty() => Ok(ObjectConfig {
                backend,
                signing_key,
            }),
            _ => Err(bad),
        }
    }
}

/// The S3 settings (`GATEWAY_OBJECT_STORE=s3`); each bad or missing variable
/// is added to `bad`.
fn s3_from_lookup(
    get: &impl Fn(&str) -> Option<String>,
    bad: &mut Vec<(&'static str, String)>,
) -> Option<S3Config> {
    let mut required = |name: &'static str| {
        let v = get(name);
        if v.is_none() {
            bad.push((name, format!("required when {GATEWAY_OBJECT_STORE}=s3")));
        }
        v
    };
    let bucket = required(GATEWAY_S3_BUCKET);
    let access_key = required(GATEWAY_S3_ACCESS_KEY);
    let secret_key = required(GATEWAY_S3_SECRET_KEY);
    let region = get(GATEWAY_S3_REGION).unwrap_or_else(|| DEFAULT_S3_REGION.to_owned());
    let endpoint =
        get(GATEWAY_S3_ENDPOINT).unwrap_or_else(|| format!("https://s3.{region}.amazonaws.com"));
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        bad.push((
            GATEWAY_S3_ENDPOINT,
            format!("{endpoint:?} is not an http(s) URL"),
        ));
    }
    let path_style = match get(GATEWAY_S3_PATH_STYLE) {
        None => Some(true),
        Some(v) => {
            let b = parse_bool(&v);
            if b.is_none() {
                bad.push((
                    GATEWAY_S3_PATH_STYLE,
                    format!("expected true or false, got {v:?}"),
                ));
            }
            b
        }
    };
    let timeout = match get(GATEWAY_S3_TIMEOUT_SECS) {
        None => Some(DEFAULT_REQUEST_TIMEOUT),
        Some(v) => match v.parse::<u64>() {
            Ok(secs) if secs > 0 => Some(std::time::Duration::from_secs(secs)),
            _ => {
                bad.push((
                    GATEWAY_S3_TIMEOUT_SECS,
                    format!("expected a whole number of seconds above 0, got {v:?}"),
                ));
                None
            }
        },
    };
    Some(S3Config {
        endpoint: endpoint.trim_end_matches('/').to_owned(),
        region,
        bucket: bucket?,
        access_key: access_key?,
        secret_key: secret_key?,
        path_style: path_style?,
        timeout: timeout?,
    })
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// 64 hex digits are decoded; anything else is used as is.
fn decode_signing_key(v: &str) -> Vec<u8> {
    match hex::decode(v) {
        Ok(bytes) if v.len() == 64 => bytes,
        _ => v.as_bytes().to_vec(),
    }
}

/// Opens the configured store. The local store lives in
/// `<data_dir>/objects`, and its presigned URLs start with
/// `public_base_url` (the gateway's external URL); `sync_full` is the
/// database's durability (`GATEWAY_DB_SYNC=full`), which its packed objects
/// share ([`super::pack`]). S3 makes no request here.
pub fn open(
    config: &ObjectConfig,
    data_dir: &Path,
    public_base_url: &str,
    sync_full: bool,
) -> Result<Arc<dyn ObjectStore>, ObjectError> {
    match &config.backend {
        ObjectBackend::Local => {
            let key = match &config.signing_key {
                Some(k) => k.clone(),
                None => load_or_create_signing_key(&data_dir.join(SIGNING_KEY_FILE))?,
            };
            let store =
                LocalStore::new(data_dir.join(OBJECTS_DIR), public_base_url.to_owned(), key)?
                    .with_sync_full(sync_full);
            Ok(Arc::new(store))
        }
        ObjectBackend::S3(s3) => Ok(Arc::new(S3Store::new(s3.clone())?)),
    }
}

/// Reads the signing key file (hex), creating it with 32 random bytes (mode
/// 0600) when it does not exist yet.
pub fn load_or_create_signing_key(path: &Path) -> Result<Vec<u8>, ObjectError> {
    gateway_base::secret_file::load_or_create(path, 16).map_err(ObjectError::Backend)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn defaults_to_local() {
        assert_eq!(
            ObjectConfig::from_lookup(lookup(&[])).unwrap(),
            ObjectConfig::default()
        );
        let c = ObjectConfig::from_lookup(lookup(&[
            (GATEWAY_OBJECT_STORE, "local"),
            (GATEWAY_SIGNING_KEY, "secret"),
        ]))
        .unwrap();
        assert_eq!(c.backend, ObjectBackend::Local);
        assert_eq!(c.signing_key.as_deref(), Some(&b"secret"[..]));
        let hex64 = "00".repeat(31) + "ff";
        let c = ObjectConfig::from_lookup(lookup(&[(GATEWAY_SIGNING_KEY, &hex64)])).unwrap();
        assert_eq!(c.signing_key.as_ref().map(Vec::len), Some(32));
        assert!(!format!("{c:?}").contains("secret"));
    }

    #[test]
    fn s3_settings_and_errors() {
        let base = [
            (GATEWAY_OBJECT_STORE, "S3"),
            (GATEWAY_S3_BUCKET, "audio"),
            (GATEWAY_S3_ACCESS_KEY, "AK"),
            (GATEWAY_S3_SECRET_KEY, "SK-very-secret"),
        ];
        let c = ObjectConfig::from_lookup(lookup(&base)).unwrap();
        let ObjectBackend::S3(s3) = &c.backend else {
            panic!("not s3")
        };
        assert_eq!(s3.region, "us-east-1");
        assert_eq!(s3.endpoint, "https://s3.us-east-1.amazonaws.com");
        assert!(s3.path_style);
        assert!(!format!("{c:?}").contains("SK-very-secret"));

        let mut vars = base.to_vec();
        vars.extend([
            (GATEWAY_S3_ENDPOINT, "http://127.0.0.1:9000/"),
            (GATEWAY_S3_REGION, "eu-west-3"),
            (GATEWAY_S3_PATH_STYLE, "false"),
        ]);
        let c = ObjectConfig::from_lookup(lookup(&vars)).unwrap();
        let ObjectBackend::S3(s3) = &c.backend else {
            panic!("not s3")
        };
        assert_eq!(
            (s3.endpoint.as_str(), s3.region.as_str(), s3.path_style),
            ("http://127.0.0.1:9000", "eu-west-3", false)
        );

        let names = |vars: &[(&str, &str)]| -> Vec<&'static str> {
            let err = ObjectConfig::from_lookup(lookup(vars)).unwrap_err();
            err.into_iter().map(|(name, _)| name).collect()
        };
        assert_eq!(names(&base[..3]), [GATEWAY_S3_SECRET_KEY]);
        assert_eq!(
            names(&[(GATEWAY_OBJECT_STORE, "ftp")]),
            [GATEWAY_OBJECT_STORE]
        );
        let mut vars = base.to_vec();
        vars.push((GATEWAY_S3_PATH_STYLE, "maybe"));
        assert_eq!(names(&vars), [GATEWAY_S3_PATH_STYLE]);
        // Every bad variable at once, each by its own name.
        assert_eq!(
            names(&[
                (GATEWAY_OBJECT_STORE, "s3"),
                (GATEWAY_S3_ENDPOINT, "ftp://x"),
                (GATEWAY_S3_PATH_STYLE, "maybe"),
            ]),
            [
                GATEWAY_S3_BUCKET,
                GATEWAY_S3_ACCESS_KEY,
                GATEWAY_S3_SECRET_KEY,
                GATEWAY_S3_ENDPOINT,
                GATEWAY_S3_PATH_STYLE
            ]
        );
    }

    #[test]
    fn signing_key_file_is_generated_once_and_private() {
        let dir = super::super::tests::TempDir::new();
        let path = dir.path().join("sub").join(SIGNING_KEY_FILE);
        let first = load_or_create_signing_key(&path).unwrap();
        assert_eq!(first.len(), 32);
        assert_eq!(load_or_create_signing_key(&path).unwrap(), first);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                0o600
            );
        }
        // `open` uses it for the local store.
        let store = open(
            &ObjectConfig::default(),
            &dir.path().join("sub"),
            "http://gw",
            true,
        )
        .unwrap();
        assert_eq!(store.backend(), "local");
        assert!(store.as_local().is_some());
        assert!(dir.path().join("sub").join(OBJECTS_DIR).is_dir());
    }
}
