//! The keywords of `endpoints.toml`: one enum per keyword (method, area,
//! mode, billing, metering, gate, auth, error format, base, upstream auth,
//! field type). Each mirrors the enum of `runtime::spec` of the same name one
//! to one: a variant's Rust name is the runtime variant the generated code
//! refers to, and its string is the spelling in the table (the same as the
//! runtime's `as_str`). Re-exported by [`crate::table`].

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// Declares a keyword enum: the TOML spelling of each variant, `ALL`,
/// `as_str`, `rust_name` (the `runtime::spec` variant), `FromStr`,
/// `Display`, and a `Deserialize` that names the expected values on error.
macro_rules! keyword_enum {
    (
        $(#[$meta:meta])*
        $name:ident, $what:literal, $runtime:literal {
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
            /// Name of the `runtime::spec` type the generated code uses.
            pub const RUNTIME_TYPE: &'static str = $runtime;

            /// The spelling in `endpoints.toml` (and the runtime's `as_str`).
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )+
                }
            }

            /// The name of the matching variant of the runtime enum.
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

        impl FromStr for $name {
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

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct KeywordVisitor;

                impl<'de> Visitor<'de> for KeywordVisitor {
                    type Value = $name;

                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        write!(f, "a {} (one of: {})", $what, $name::expected())
                    }

                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$name, E> {
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
    Method, "method", "Method" {
        Get = "GET",
        Post = "POST",
        Put = "PUT",
        Patch = "PATCH",
        Delete = "DELETE",
    }
}

keyword_enum! {
    /// The part of the product a row belongs to; a key of `[areas]`.
    AreaName, "area", "Area" {
        Voice = "voice",
        Gateway = "gateway",
    }
}

keyword_enum! {
    /// How the runtime handles a route (`runtime::spec::Mode`).
    Mode, "mode", "Mode" {
        Proxy = "proxy",
        Fields = "fields",
        Synthesize = "synthesize",
        JobSubmit = "job_submit",
        JobGet = "job_get",
        JobList = "job_list",
        Upload = "upload",
        Webhook = "webhook",
        OwnedSearch = "owned_search",
        Chat = "chat",
        Completion = "completion",
        StopStream = "stop_stream",
        Embedding = "embedding",
        Image = "image",
        VideoSubmit = "video_submit",
        VideoGet = "video_get",
        VideoList = "video_list",
        VideoCancel = "video_cancel",
        Speech = "speech",
        Transcription = "transcription",
        Catalogue = "catalogue",
        CatalogueTrending = "catalogue_trending",
        CatalogueModel = "catalogue_model",
        Register = "register",
        Login = "login",
        TokenRefresh = "token_refresh",
        Logout = "logout",
        ConfirmEmail = "confirm_email",
        ResetPassword = "reset_password",
        Me = "me",
        KeyList = "key_list",
        KeyCreate = "key_create",
        KeyRevoke = "key_revoke",
        AdminUsers = "admin_users",
        AdminDisable = "admin_disable",
        AdminEnable = "admin_enable",
        AdminDelete = "admin_delete",
        AdminCredits = "admin_credits",
        AdminUsage = "admin_usage",
    }
}

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
        matches!(self, Mode::Upload | Mode::Webhook) || self.is_account()
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
                | Mode::KeyList
                | Mode::KeyCreate
                | Mode::KeyRevoke
                | Mode::AdminUsers
                | Mode::AdminDisable
                | Mode::AdminEnable
                | Mode::AdminDelete
                | Mode::AdminCredits
                | Mode::AdminUsage
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

keyword_enum! {
    /// What a successful request is billed by (`runtime::spec::Billing`).
    Billing, "billing", "Billing" {
        Free = "free",
        AudioSeconds = "audio_seconds",
        VideoSeconds = "video_seconds",
        Images = "images",
        MediaSeconds = "media_seconds",
        Searches = "searches",
        Enrollments = "enrollments",
        Generations = "generations",
        VoiceSubscription = "voice_subscription",
        Tokens = "tokens",
    }
}

keyword_enum! {
    /// How the quantity billed for one request is found (`runtime::spec::Metering`).
    /// Defaults by billing unit: free and voice_subscription → none; searches,
    /// enrollments, generations → per_request; seconds, images, tokens → measured.
    Metering, "metering", "Metering" {
        None = "none",
        PerRequest = "per_request",
        FirstBuild = "first_build",
        Measured = "measured",
    }
}

keyword_enum! {
    /// A configuration switch that must be on for the route to be served.
    Gate, "gate", "Gate" {
        BusinessPlan = "business_plan",
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
    /// How the caller proves who it is (`runtime::spec::Auth`).
    Auth, "auth", "Auth" {
        Bearer = "bearer",
        None = "none",
        Signature = "signature",
        Admin = "admin",
        AccessToken = "access_token",
    }
}

keyword_enum! {
    /// Wire format of error bodies (`runtime::spec::ErrorFormat`).
    ErrorFormat, "error format", "ErrorFormat" {
        Detail = "detail",
        Error = "error",
        Envelope = "envelope",
    }
}

keyword_enum! {
    /// Which upstream base URL a call goes to; a key of `[bases]`.
    BaseName, "base", "Base" {
        Main = "main",
        Synth = "synth",
        Llm = "llm",
    }
}

keyword_enum! {
    /// How the provider key is presented to a base (`runtime::spec::UpstreamAuth`).
    UpstreamAuth, "upstream auth", "UpstreamAuth" {
        Bearer = "bearer",
        Token = "token",
        AccessToken = "access_token",
    }
}

keyword_enum! {
    /// JSON type of a body field or query parameter (`runtime::spec::FieldType`).
    FieldType, "field type", "FieldType" {
        String = "string",
        Integer = "integer",
        Number = "number",
        Boolean = "boolean",
        Object = "object",
        Array = "array",
        Any = "any",
    }
}

impl FieldType {
    /// `integer` and `number`: the types `min` and `max` apply to.
    pub fn is_numeric(self) -> bool {
        matches!(self, FieldType::Integer | FieldType::Number)
    }
}
