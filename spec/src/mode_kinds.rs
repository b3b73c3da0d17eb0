//! What each kind of mode needs and allows: the predicates over
//! [`Mode`] the generator and the runtime ask.

use super::keywords::Mode;

impl Mode {
    /// Modes whose runtime function always calls the upstream named by the row.
    pub fn needs_upstream(self) -> bool {
        matches!(
            self,
            Mode::Proxy
                | Mode::Fields
                | Mode::OwnedSearch
                | Mode::Synthesize
                | Mode::JobSubmit
                | Mode::JobGet
                | Mode::JobList
        )
    }

    /// Modes the gateway serves itself; an `upstream` on them is a mistake.
    pub fn forbids_upstream(self) -> bool {
        matches!(self, Mode::Upload | Mode::Webhook | Mode::Mcp)
            || self.is_account()
            || self.is_media()
            || self.is_file()
            || self.is_payment()
            || self.is_history()
    }

    /// The history modes (usage, generations, credits): read from the
    /// gateway's database, the caller's or, on an admin row, a user's.
    pub fn is_history(self) -> bool {
        matches!(
            self,
            Mode::Generation | Mode::UsageTotals | Mode::CreditBalance | Mode::CreditLedger
        )
    }

    /// The payment modes (Stripe Checkout): the gateway talks to Stripe
    /// itself, never through a row's upstream.
    pub fn is_payment(self) -> bool {
        matches!(
            self,
            Mode::StripeCheckout | Mode::StripeWebhook | Mode::StripePurchases
        )
    }

    /// The media-file modes (`/media`): served by the gateway from its
    /// database and object store.
    pub fn is_media(self) -> bool {
        matches!(
            self,
            Mode::MediaUpload | Mode::MediaGet | Mode::MediaList | Mode::MediaDelete
        )
    }

    /// The file modes (`/files`): served by the gateway from its database
    /// and object store.
    pub fn is_file(self) -> bool {
        matches!(
            self,
            Mode::FileUpload
                | Mode::FileList
                | Mode::FileGet
                | Mode::FileContent
                | Mode::FileDelete
                | Mode::BatchCreate
                | Mode::BatchList
                | Mode::BatchGet
                | Mode::BatchCancel
        )
    }

    /// The account modes (accounts, tokens, keys, admin): served by the
    /// gateway from its own database.
    pub fn is_account(self) -> bool {
        matches!(
            self,
            Mode::Register
                | Mode::Login
                | Mode::TokenRefresh
                | Mode::Logout
                | Mode::ConfirmEmail
                | Mode::ResetPassword
                | Mode::Me
                | Mode::AccountDelete
                | Mode::OauthAuthorize
                | Mode::OauthCallback
                | Mode::KeyList
                | Mode::KeyCreate
                | Mode::KeyRevoke
                | Mode::KeyUpdate
                | Mode::AlertSettingsGet
                | Mode::AlertSettingsSet
                | Mode::AlertList
                | Mode::OrgCreate
                | Mode::OrgList
                | Mode::OrgInvite
                | Mode::OrgAccept
                | Mode::OrgMembers
                | Mode::OrgMemberRemove
                | Mode::AdminUsers
                | Mode::AdminDisable
                | Mode::AdminEnable
                | Mode::AdminDelete
                | Mode::AdminCredits
                | Mode::AdminReload
                | Mode::AdminPrices
        )
    }

    /// The asynchronous-job modes, which need a `job` kind.
    pub fn is_job(self) -> bool {
        matches!(self, Mode::JobSubmit | Mode::JobGet | Mode::JobList)
    }

    /// Modes that forward the request to the upstream path as it is, so every
    /// route parameter is expected to reach the upstream path.
    pub fn forwards_path(self) -> bool {
        matches!(self, Mode::Proxy | Mode::Fields)
    }
}
