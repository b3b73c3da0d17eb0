//! Outgoing mail (confirmation and password-reset messages) through
//! `lettre`: SMTP when `GATEWAY_SMTP_URL` is set, otherwise one `.eml` file
//! per message under `<data dir>/outbox/` (what the demo and the tests read).
//!
//! A message carries a token; neither the message nor its token is ever
//! logged: a failure is logged with the recipient's domain only.

use std::path::Path;

use lettre::message::header::ContentType;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use crate::auth::config::AccountConfig;

/// Directory of the data directory where messages go without SMTP.
pub const OUTBOX_DIR: &str = "outbox";

/// Sends a plain-text message. Errors are described without the message.
pub async fn send(
    config: &AccountConfig,
    data_dir: &Path,
    to: &str,
    subject: &str,
    body: String,
) -> Result<(), String> {
    let domain = to.rsplit('@').next().unwrap_or("");
    let message = Message::builder()
        .from(
            config
                .mail_from
                .parse()
                .map_err(|e| format!("GATEWAY_MAIL_FROM: {e}"))?,
        )
        .to(to
            .parse()
            .map_err(|e| format!("recipient at {domain}: {e}"))?)
        .subject(subject)
        .header(ContentType::TEXT_PLAIN)
        .body(body)
        .map_err(|e| format!("building a message: {e}"))?;
    match &config.smtp_url {
        Some(url) => {
            let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
                .map_err(|e| format!("GATEWAY_SMTP_URL: {e}"))?
                .build();
            transport
                .send(message)
                .await
                .map(drop)
                .map_err(|e| format!("sending to {domain}: {e}"))
        }
        None => {
            let dir = data_dir.join(OUTBOX_DIR);
            let name = format!(
                "{}-{}.eml",
                chrono::Utc::now().format("%Y%m%dT%H%M%S%.6fZ"),
                uuid::Uuid::new_v4().simple()
            );
            let bytes = message.formatted();
            // A message carries a live token: the owner's only (0600 in a
            // 0700 directory), whatever the umask.
            tokio::task::spawn_blocking(move || {
                use std::io::Write;
                gateway_store::create_private_dir(&dir)?;
                let mut options = std::fs::OpenOptions::new();
                options.write(true).create_new(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
                let mut file = options.open(dir.join(name))?;
                file.write_all(&bytes)
            })
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("writing to the outbox: {e}"))
        }
    }
}
