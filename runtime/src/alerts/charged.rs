//! The users charged since the alerts' last round: told by the record
//! writer's thread, taken by the alerts task.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

/// The users charged since the last round (filled by the record writer).
#[derive(Default)]
pub struct Charged {
    users: Mutex<HashSet<i64>>,
    /// Users whose settings changed on this instance since the last round.
    changed: Mutex<HashSet<i64>>,
    wake: tokio::sync::Notify,
}

impl Charged {
    /// `user` was charged (called on the writer's thread: no waiting).
    pub fn tell(&self, user: i64) {
        let mut users = self.users.lock().unwrap_or_else(PoisonError::into_inner);
        if users.insert(user) && users.len() == 1 {
            self.wake.notify_one();
        }
    }

    /// `user`'s alert settings changed here: checked at the next round,
    /// whatever was known of them.
    pub fn settings_changed(&self, user: i64) {
        self.changed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(user);
        self.tell(user);
    }

    pub(super) fn take_changed(&self) -> HashSet<i64> {
        std::mem::take(&mut *self.changed.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Resolves when a first user is told after a round's take.
    pub(super) async fn woken(&self) {
        self.wake.notified().await
    }

    pub(super) fn take(&self) -> HashSet<i64> {
        std::mem::take(&mut *self.users.lock().unwrap_or_else(PoisonError::into_inner))
    }
}
