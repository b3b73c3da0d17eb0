//! Object storage: where generated audio, uploads and mirrored results live.
//!
//! One trait, [`ObjectStore`], two backends: the local filesystem (the
//! embedded default, under `GATEWAY_DATA_DIR`; the gateway serves its own
//! presigned URLs) and S3 through `rust-s3` (any S3-compatible store; real
//! presigned GET URLs). Bodies move as streams in both directions.
//!
//! * [`local`] — [`LocalStore`]: files under `$GATEWAY_DATA_DIR/objects`,
//!   written to a temporary file and renamed into place.
//! * [`pack`] — packed segments: small expiring objects appended to shared
//!   files, found through the database, their fsync shared with the group commit.
//! * [`signing`] — the HMAC of the local store's presigned URLs.
//! * [`serve`] — [`serve_presigned`]: answers `GET`/`HEAD /objects/...` for
//!   the local store (signature, expiry, `Range`).
//! * [`s3`] — [`S3Store`]: any S3-compatible store through `rust-s3`.
//! * [`config`] — environment → [`ObjectConfig`], and [`open`].
//! * [`store`] — the [`ObjectStore`] trait; `local_store` implements it
//!   for [`LocalStore`].
//! * [`types`] — what the backends share: [`ObjectError`], [`ByteStream`],
//!   [`ByteRange`], [`ObjectBody`], [`ObjectMeta`], [`validate_key`].
//! * `testing` (feature `testing`, and in this crate's tests) — an
//!   in-process S3-compatible server for tests.
//!
//! Keys are checked the same way by both backends ([`validate_key`]), so a
//! key that works on one works on the other.

pub mod config;
pub mod local;
mod local_store;
pub mod pack;
pub mod s3;
pub mod serve;
pub mod signing;
pub mod store;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
mod tests;
pub mod types;

pub use config::{open, ObjectBackend, ObjectConfig};
pub use local::LocalStore;
pub use s3::{S3Config, S3Store};
pub use serve::{serve_presigned, stream_body};
pub use store::ObjectStore;
pub use types::{validate_key, ByteRange, ByteStream, ObjectBody, ObjectError, ObjectMeta};
