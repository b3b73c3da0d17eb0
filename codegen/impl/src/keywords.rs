//! The keywords of `endpoints.toml`: the enums of the `gateway-spec` crate,
//! the very types generated code is made of (declared once there, with
//! their table spelling, `FromStr` and `Deserialize`). Re-exported by
//! [`crate::table`]; `AreaName` and `BaseName` are the generator's names for
//! `Area` and `Base` (its own `Area`-like structs are the resolved sections).

pub use gateway_spec::{
    Area as AreaName, Auth, Base as BaseName, Billing, ErrorFormat, FieldType, Gate, Keyword,
    Metering, Method, Mode, UpstreamAuth,
};
