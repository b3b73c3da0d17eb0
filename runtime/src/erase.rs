//! Erasing an account (`DELETE /auth/me`, `gateway users delete --purge`):
//! its objects deleted from the object store (uploads, files, media, speech,
//! batch results), then its personal data erased and its keys revoked in
//! one transaction (`gateway_store::Erasure`), then every instance's key
//! cache dropped, so that its keys answer 401 at once everywhere. Usage,
//! ledger and audit records stay for accounting, under the same id, now
//! anonymous. Resources at the voice provider (voices, recordings, …) are
//! the provider's to delete: the gateway only forgets it owned them when
//! the caller deletes them first.

use gateway_adapters::objects::ObjectError;
use gateway_base::errors::ApiError;
use gateway_store::{Erased, Erasure};

use crate::services::Gateway;

/// Erases `user` (see the module docs). An object that cannot be deleted
/// stops the erasure before anything is erased (it can be asked again).
pub async fn erase(gw: &Gateway, user: i64) -> Result<Erased, ApiError> {
    let live = gw.store.blocking(move |s| s.live_objects_of(user)).await?;
    for (_, key) in &live {
        match gw.objects.delete(key).await {
            Ok(()) | Err(ObjectError::NotFound) => {}
            Err(e) => {
                return Err(crate::generated::stored_failed(
                    "deleting an erased account's object".into(),
                    e,
                ))
            }
        }
    }
    let erased = gw.store.blocking(move |s| s.erase_user(user)).await?;
    gw.credentials_changed().await;
    tracing::info!(
        user_id = user,
        keys = erased.keys_revoked,
        objects = erased.objects,
        "account erased"
    );
    Ok(erased)
}
