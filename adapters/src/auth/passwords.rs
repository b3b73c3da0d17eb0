//! Passwords: argon2id hashes in the PHC string format. A password is never
//! logged, stored or answered; only its hash is stored.
//!
//! Hashing and checking run on a [`Pool`]: a few threads of their own
//! (`GATEWAY_PASSWORD_HASHERS`), because each argon2 call takes 19 MiB for
//! its duration. A request waits for a free thread at most
//! `GATEWAY_PASSWORD_HASH_WAIT_MS`, then is answered 429 with `Retry-After`.
//! So a burst of logins costs at most hashers × 19 MiB, and that memory is
//! the same threads' each time (it is not spread over the blocking pool's
//! threads, whose allocator arenas would keep it after the burst).

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;

/// Shortest password accepted.
pub const MIN_LEN: usize = 8;
/// Longest password accepted (hashing cost is bounded).
pub const MAX_LEN: usize = 256;

/// A job of the pool.
type Job = Box<dyn FnOnce() + Send>;

/// The threads that hash and check passwords, and the wait for one of them.
/// The threads end when the pool is dropped.
pub struct Pool {
    jobs: std::sync::mpsc::Sender<Job>,
    permits: std::sync::Arc<tokio::sync::Semaphore>,
    wait: std::time::Duration,
}

impl Pool {
    /// `threads` threads (at least 1); a caller waits at most `wait` for one.
    pub fn new(threads: usize, wait: std::time::Duration) -> Pool {
        let threads = threads.max(1);
        big_blocks_are_mapped();
        let (jobs, rx) = std::sync::mpsc::channel::<Job>();
        let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
        for i in 0..threads {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("password-{i}"))
                .spawn(move || loop {
                    let job = match rx.lock().unwrap_or_else(|e| e.into_inner()).recv() {
                        Ok(job) => job,
                        Err(_) => return, // the pool was dropped
                    };
                    // A panicking job drops its permit and its answer; the thread stays.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "starting a password thread");
            }
        }
        Pool {
            jobs,
            permits: std::sync::Arc::new(tokio::sync::Semaphore::new(threads)),
            wait,
        }
    }

    /// Runs `f` on one of the pool's threads. Every thread busy for longer
    /// than the pool's wait: 429 (`Retry-After: 1`).
    pub async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, gateway_base::errors::ApiError> {
        let busy = || gateway_base::errors::ApiError::RateLimited {
            message: "too many password checks at once; retry in 1 s".into(),
            retry_after: 1,
        };
        let permit =
            match tokio::time::timeout(self.wait, self.permits.clone().acquire_owned()).await {
                Ok(Ok(p)) => p,
                _ => {
                    gateway_base::telemetry::rate_limited("passwords");
                    return Err(busy());
                }
            };
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.jobs
            .send(Box::new(move || {
                let _ = tx.send(f());
                drop(permit);
            }))
            .map_err(|_| gateway_base::errors::ApiError::bug("the password pool is gone"))?;
        rx.await
            .map_err(|_| gateway_base::errors::ApiError::bug("a password job failed"))
    }

    /// [`hash`] on the pool.
    pub async fn hash(&self, password: String) -> Result<String, gateway_base::errors::ApiError> {
        self.run(move || hash(&password))
            .await?
            .map_err(|e| gateway_base::errors::ApiError::internal("hashing a password", e))
    }

    /// [`verify`] on the pool.
    pub async fn verify(
        &self,
        password: String,
        stored: Option<String>,
    ) -> Result<bool, gateway_base::errors::ApiError> {
        self.run(move || verify(&password, stored.as_deref())).await
    }
}

/// Makes glibc serve every allocation of 4 MiB or more with its own mapping,
/// unmapped when freed. glibc otherwise raises that threshold to the size
/// of the largest block freed (argon2's 19 MiB), after which such blocks come
/// from the thread's heap and stay resident after they are freed: memory a
/// burst of logins took would not come back.
fn big_blocks_are_mapped() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: mallopt only sets an allocator parameter; no pointer is passed.
            let ok = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 4 << 20) };
            if ok != 1 {
                tracing::warn!("mallopt(M_MMAP_THRESHOLD) refused");
            }
        });
    }
}

/// The argon2id hash (PHC string) of `password`, with a random salt.
pub fn hash(password: &str) -> Result<String, String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| format!("hashing a password: {e}"))
}

/// Whether `password` matches the stored hash. `None` (an unknown user, an
/// account without a password) is checked against a fixed hash, so that the
/// answer takes the same time either way.
pub fn verify(password: &str, stored: Option<&str>) -> bool {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let dummy = DUMMY.get_or_init(|| hash("not a password of anyone").unwrap_or_default());
    let (phc, real) = match stored {
        Some(s) => (s, true),
        None => (dummy.as_str(), false),
    };
    let Ok(parsed) = PasswordHash::new(phc) else {
        return false;
    };
    Argon2::default()
        .verify_password(password.as_bytes(), &parsed)
        .is_ok()
        && real
}

/// Why a new password is refused, if it is.
pub fn check(password: &str) -> Result<(), String> {
    let n = password.chars().count();
    if n < MIN_LEN {
        return Err(format!("password: at least {MIN_LEN} characters"));
    }
    if password.len() > MAX_LEN {
        return Err(format!("password: at most {MAX_LEN} bytes"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_verify_and_differ() {
        let a = hash("correct horse").unwrap();
        let b = hash("correct horse").unwrap();
        assert_ne!(a, b, "salted");
        assert!(a.starts_with("$argon2id$"));
        assert!(verify("correct horse", Some(&a)));
        assert!(!verify("wrong horse", Some(&a)));
        assert!(!verify("correct horse", None));
    }
}
