//! The keywords of `endpoints.toml`, declared once: one enum per keyword
//! (method, area, mode, billing, metering, gate, auth, error format, base,
//! upstream auth, field type). A variant's Rust name is what generated code
//! refers to; its string is the spelling in the table (`as_str`).
//!
//! Each enum has `ALL`, `WHAT` (its name in messages), `as_str`,
//! `rust_name`, `expected`, `FromStr` and `Display`; with the `serde`
//! feature (the generator's), a `Deserialize` that names the accepted
//! spellings on error.

/// What every keyword enum offers generically (the generator spells a
/// value as `<RUST_TYPE>::<rust_name>`).
pub trait Keyword: Copy + 'static {
    /// The type's own name.
    const RUST_TYPE: &'static str;
    /// What this keyword is called in error messages.
    const WHAT: &'static str;
    /// Every variant, in declaration order.
    fn all() -> &'static [Self];
    /// The spelling in `endpoints.toml`.
    fn as_str(self) -> &'static str;
    /// The variant's Rust name.
    fn rust_name(self) -> &'static str;
}

/// Declares a keyword enum and its helpers (see the module documentation).
macro_rules! keyword_enum {
    (
        $(#[$meta:meta])*
        $name:ident, $what:literal {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            /// What this keyword is called in error messages (`mode`, `billing`, ...).
            pub const WHAT: &'static str = $what;

            /// The spelling in `endpoints.toml`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )+
                }
            }

            /// The variant's Rust name (what generated code spells).
            pub fn rust_name(self) -> &'static str {
                match self {
                    $( $name::$variant => stringify!($variant), )+
                }
            }

            /// `a, b, c`: the accepted spellings, for error messages.
            pub fn expected() -> String {
                Self::ALL.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ")
            }
        }

        impl Keyword for $name {
            const RUST_TYPE: &'static str = stringify!($name);
            const WHAT: &'static str = $what;

            fn all() -> &'static [Self] {
                Self::ALL
            }

            fn as_str(self) -> &'static str {
                $name::as_str(self)
            }

            fn rust_name(self) -> &'static str {
                $name::rust_name(self)
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $( $text => Ok($name::$variant), )+
                    _ => Err(format!(
                        "unknown {} `{}`, expected one of: {}",
                        $what,
                        s,
                        Self::expected()
                    )),
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        #[cfg(feature = "serde")]
        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct KeywordVisitor;

                impl ::serde::de::Visitor<'_> for KeywordVisitor {
                    type Value = $name;

                    fn expecting(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                        write!(f, "a {} (one of: {})", $what, $name::expected())
                    }

                    fn visit_str<E: ::serde::de::Error>(self, v: &str) -> Result<$name, E> {
                        v.parse().map_err(E::custom)
                    }
                }

                deserializer.deserialize_str(KeywordVisitor)
            }
        }
    };
}

keyword_enum! {
    /// HTTP method of a route or of its upstream call (upper case in the table).
    Method, "method" {
        Get = "GET",
        Post = "POST",
        Put = "PUT",
        Patch = "PATCH",
        Delete = "DELETE",
    }
}

impl Method {
    pub fn to_http(self) -> http::Method {
        match self {
            Method::Get => http::Method::GET,
            Method::Post => http::Method::POST,
            Method::Put => http::Method::PUT,
            Method::Patch => http::Method::PATCH,
            Method::Delete => http::Method::DELETE,
        }
    }
}

keyword_enum! {
    /// Which part of the spec a route belongs to; decides the URL prefix (a
    /// key of `[areas]`).
    Area, "area" {
        /// `/api/v1/voice/...`: the voice provider in its own request shape.
        Voice = "voice",
        /// `/api/v1/...`: the general AI gateway.
        Gateway = "gateway",
    }
}

keyword_enum! {
    /// How the runtime handles a route. A new behaviour is a new mode (a
    /// runtime function), never a special case in generated code.
    Mode, "mode" {
        /// Forward the request as is (JSON body, query) and answer with the upstream's body.
        Proxy = "proxy",
        /// Body is `{"fields": {...}}`; the `fields` object is forwarded unchanged.
        Fields = "fields",
        /// Text-to-speech synthesis: answer in the gateway's synthesis shape.
        Synthesize = "synthesize",
        /// Submit an asynchronous job.
        JobSubmit = "job_submit",
        /// Read one asynchronous job.
        JobGet = "job_get",
        /// List asynchronous jobs.
        JobList = "job_list",
        /// Gateway-local multipart upload into the object store.
        Upload = "upload",
        /// Inbound, signature-verified webhook from the upstream provider.
        Webhook = "webhook",
        /// A search over the row's `resource` kind (identity search): only the
        /// caller's own resources are answered.
        OwnedSearch = "owned_search",
        // ---- general gateway (area B) ----
        Chat = "chat",
        Completion = "completion",
        StopStream = "stop_stream",
        /// Anthropic's Messages API as an input dialect: translated into the
        /// chat path's body, the answer (and its stream) translated back.
        Messages = "messages",
        /// Anthropic's `count_tokens`: the hold's input estimate, free.
        CountTokens = "count_tokens",
        /// Gemini's API (`generateContent`, `streamGenerateContent`,
        /// `countTokens`, `embedContent`, `batchEmbedContents`) as an input
        /// dialect: passed through to a `gemini` provider, translated for
        /// the others; the row's last parameter is `model:method`.
        Gemini = "gemini",
        /// OpenAI's Responses API as an input dialect: passed through to an
        /// `openai` provider that serves it, translated for the others;
        /// the conversation stored by the gateway.
        Responses = "responses",
        /// A stored response (`GET /responses/{response_id}`).
        ResponseGet = "response_get",
        /// A stored response deleted.
        ResponseDelete = "response_delete",
        /// A stored response's input items, paged.
        ResponseInputItems = "response_input_items",
        /// A background response cancelled.
        ResponseCancel = "response_cancel",
        Embedding = "embedding",
        Image = "image",
        VideoSubmit = "video_submit",
        VideoGet = "video_get",
        VideoList = "video_list",
        VideoCancel = "video_cancel",
        Speech = "speech",
        /// The voices of the speech models: aliases and each provider's own.
        SpeechVoices = "speech_voices",
        Transcription = "transcription",
        /// OpenAI's Realtime API over a WebSocket (`GET` with `Upgrade`),
        /// relayed to a realtime model's own WebSocket; each response held
        /// before it is forwarded and billed before its `response.done`.
        Realtime = "realtime",
        /// OpenAI's Files API: a file uploaded (multipart, streamed into
        /// the object store), listed, read, its content streamed, deleted.
        FileUpload = "file_upload",
        FileList = "file_list",
        FileGet = "file_get",
        FileContent = "file_content",
        FileDelete = "file_delete",
        /// OpenAI's Batch API: a batch of a file's requests made (its lines
        /// validated first), listed, read, cancelled; the gateway runs the
        /// lines itself, each a request of its own.
        BatchCreate = "batch_create",
        BatchList = "batch_list",
        BatchGet = "batch_get",
        BatchCancel = "batch_cancel",
        /// The Model Context Protocol's Streamable HTTP transport (`POST`,
        /// `GET`, `DELETE`), relayed to an MCP server of the servers file
        /// with the caller's tool permissions, holds and records.
        Mcp = "mcp",
        /// Live transcription over a WebSocket (Deepgram's live protocol),
        /// relayed to a `deepgram` model's live `/v1/listen`, billed per
        /// period of audio received.
        SttStream = "stt_stream",
        Catalogue = "catalogue",
        CatalogueTrending = "catalogue_trending",
        CatalogueModel = "catalogue_model",
        // ---- accounts, tokens, keys and admin (served from the database) ----
        /// `POST /auth/register`: a new account.
        Register = "register",
        /// `POST /auth/login`: access and refresh tokens for a password.
        Login = "login",
        /// `POST /auth/refresh`: a new access token (refresh token rotated).
        TokenRefresh = "token_refresh",
        /// `POST /auth/logout`: revokes the presented access token (and a refresh token).
        Logout = "logout",
        /// `POST /auth/confirm`: confirms an e-mail address with a mailed token.
        ConfirmEmail = "confirm_email",
        /// `POST /auth/reset-password`: requests or completes a password reset.
        ResetPassword = "reset_password",
        /// `GET /auth/me`: the caller and their balance; `DELETE`: erased.
        Me = "me",
        AccountDelete = "account_delete",
        /// `GET /auth/oauth/{provider}/authorize`: a redirect to an OpenID
        /// Connect provider (code flow, PKCE, one-time state and nonce).
        OauthAuthorize = "oauth_authorize",
        /// `GET /auth/oauth/{provider}/callback`: the code exchanged, the ID
        /// token checked, the user logged in (the account made on first sign-in).
        OauthCallback = "oauth_callback",
        /// The caller's API keys (never the keys themselves), a new one
        /// (answered once), one revoked.
        KeyList = "key_list",
        KeyCreate = "key_create",
        KeyRevoke = "key_revoke",
        /// Sets or removes the budget of one of the caller's API keys.
        KeyUpdate = "key_update",
        /// The caller's spend-alert settings, read and set (the webhook's secret answered once).
        AlertSettingsGet = "alert_settings_get",
        AlertSettingsSet = "alert_settings_set",
        /// The spend alerts sent to the caller, newest first.
        AlertList = "alert_list",
        /// A new organization, its creator the owner.
        OrgCreate = "org_create",
        /// The caller's organizations and roles.
        OrgList = "org_list",
        /// An invitation (its token mailed), and its acceptance.
        OrgInvite = "org_invite",
        OrgAccept = "org_accept",
        /// An organization's members, listed; one removed (their keys of it revoked).
        OrgMembers = "org_members",
        OrgMemberRemove = "org_member_remove",
        /// Admin: every user.
        AdminUsers = "admin_users",
        /// Admin: disables or enables a user.
        AdminDisable = "admin_disable",
        AdminEnable = "admin_enable",
        /// Admin: deletes a user (soft).
        AdminDelete = "admin_delete",
        /// Admin: grants credit to a user.
        AdminCredits = "admin_credits",
        /// Admin: the configuration files reloaded (every instance); a price version's prices.
        AdminReload = "admin_reload",
        AdminPrices = "admin_prices",
        // ---- media files (`/media`), served from the object store ----
        /// A caller's image or audio file (multipart `file`, `file_type`),
        /// checked by its first bytes and streamed into the object store.
        MediaUpload = "media_upload",
        /// One of the caller's media files: metadata and a fresh presigned URL.
        MediaGet = "media_get",
        /// The caller's media files, paged.
        MediaList = "media_list",
        /// Soft-deletes one of the caller's media files (its object swept later).
        MediaDelete = "media_delete",
        // ---- buying credits (Stripe Checkout; served by the gateway) ----
        /// `POST /stripe/checkout`: a Stripe Checkout Session for an amount; a pending purchase.
        StripeCheckout = "stripe_checkout",
        /// `POST /stripe/webhook`: Stripe's signed events; a paid session credited once.
        StripeWebhook = "stripe_webhook",
        /// `GET /stripe/purchases`: the caller's purchases.
        StripePurchases = "stripe_purchases",
        // ---- usage and credit history (served from the database) ----
        /// `GET /generations/{request_id}`: one request, its tokens, cost and end.
        Generation = "generation",
        /// `GET /usage`: totals per day, model or route over a range of days (JSON or CSV).
        UsageTotals = "usage_totals",
        /// `GET /credits`: balance, held, available.
        CreditBalance = "credit_balance",
        /// `GET /credits/ledger`: the ledger, newest first, cursor-paged.
        CreditLedger = "credit_ledger",
    }
}

keyword_enum! {
    /// What a successful request is billed by.
    Billing, "billing" {
        /// Nothing is charged (a usage record with quantity 0 is still written).
        Free = "free",
        AudioSeconds = "audio_seconds",
        VideoSeconds = "video_seconds",
        Images = "images",
        /// Audio seconds, video seconds or images, picked from the job's media type.
        MediaSeconds = "media_seconds",
        Searches = "searches",
        Enrollments = "enrollments",
        Generations = "generations",
        VoiceSubscription = "voice_subscription",
        /// General gateway: tokens of a language model.
        Tokens = "tokens",
    }
}

keyword_enum! {
    /// How the quantity billed for one successful request is found.
    /// Defaults by billing unit ([`Metering::default_for`]): free and
    /// voice_subscription → none; searches, enrollments, generations →
    /// per_request; seconds, images, tokens → measured.
    Metering, "metering" {
        /// Nothing is billed (a usage record with quantity 0 is still written).
        None = "none",
        /// One unit per successful request (identity search, design generation).
        PerRequest = "per_request",
        /// One unit per voice, the first time it is built (voice subscription).
        FirstBuild = "first_build",
        /// Measured: audio seconds of the produced audio, or what the upstream
        /// reports for a job when it completes.
        Measured = "measured",
    }
}

impl Metering {
    /// The metering a billing unit implies when the row does not say.
    pub fn default_for(billing: Billing) -> Metering {
        match billing {
            Billing::Free | Billing::VoiceSubscription => Metering::None,
            Billing::Searches | Billing::Enrollments | Billing::Generations => Metering::PerRequest,
            Billing::AudioSeconds
            | Billing::VideoSeconds
            | Billing::Images
            | Billing::MediaSeconds
            | Billing::Tokens => Metering::Measured,
        }
    }
}

keyword_enum! {
    /// A configuration switch that must be on for the route to be served.
    Gate, "gate" {
        /// `PROVIDER_BUSINESS_PLAN_ACTIVE`.
        BusinessPlan = "business_plan",
    }
}

keyword_enum! {
    /// How the caller proves who it is.
    Auth, "auth" {
        /// `Authorization: Bearer <gateway API key or access token>`.
        Bearer = "bearer",
        /// No authentication (model catalogue).
        None = "none",
        /// HMAC signature of the body (inbound webhook).
        Signature = "signature",
        /// An admin: a user with the admin role (API key or access token), or
        /// the `X-Admin-Key` header equal to `GATEWAY_ADMIN_KEY`.
        Admin = "admin",
        /// An access token (JWT) only: an API key is refused.
        AccessToken = "access_token",
        /// As `bearer`, or the API key in `x-api-key` (Anthropic's clients).
        XApiKey = "x_api_key",
        /// As `bearer`, or the API key in `x-goog-api-key` (Google's clients).
        GoogApiKey = "goog_api_key",
        /// A WebSocket's: as `bearer` (or `Authorization: Token <key>`, as
        /// Deepgram's clients send it), or the API key in the
        /// `Sec-WebSocket-Protocol` list, as browsers must send it: OpenAI's
        /// `openai-insecure-api-key.<key>` or Deepgram's `token, <key>`.
        WebSocket = "websocket",
    }
}

keyword_enum! {
    /// Wire format of error bodies (DESIGN.md, "one type, three wire formats").
    ErrorFormat, "error format" {
        /// Voice API: `{"detail": "..."}`.
        Detail = "detail",
        /// General gateway format 1: `{"error","message","status_code","details"}`.
        Error = "error",
        /// General gateway format 2: `{"request_id","success":false,"message","data":""}`.
        Envelope = "envelope",
        /// Anthropic's: `{"type":"error","error":{"type","message"}}`.
        Anthropic = "anthropic",
        /// Google's: `{"error":{"code","message","status"}}`.
        Gemini = "gemini",
        /// Format 2's fields and OpenAI's `error` object beside them
        /// (`{"request_id","success":false,"message","data":"","error":{"message","type","param","code"}}`):
        /// the routes of OpenAI's own APIs whose SDKs read `error`.
        OpenAi = "openai",
    }
}

keyword_enum! {
    /// Which upstream base URL a call goes to (a key of `[bases]`).
    Base, "base" {
        /// The provider's main REST API (`PROVIDER_BASE_URL`).
        Main = "main",
        /// The provider's synthesis cluster (`PROVIDER_SYNTH_URL`).
        Synth = "synth",
        /// The general gateway's model provider (OpenAI-compatible).
        Llm = "llm",
    }
}

keyword_enum! {
    /// Credential header forms the upstream accepts (`upstream.md`, Authentication).
    UpstreamAuth, "upstream auth" {
        /// `Authorization: Bearer <key>`.
        Bearer = "bearer",
        /// `Authorization: Token token=<key>` (legacy main API).
        Token = "token",
        /// `x-access-token: <key>` (legacy synthesis cluster).
        AccessToken = "access_token",
    }
}

keyword_enum! {
    /// JSON type a field must have.
    FieldType, "field type" {
        String = "string",
        Integer = "integer",
        Number = "number",
        Boolean = "boolean",
        Object = "object",
        Array = "array",
        /// Any JSON value (e.g. `text` that is a string or a list of strings).
        Any = "any",
    }
}

impl FieldType {
    /// `integer` and `number`: the types `min` and `max` apply to.
    pub fn is_numeric(self) -> bool {
        matches!(self, FieldType::Integer | FieldType::Number)
    }
}
