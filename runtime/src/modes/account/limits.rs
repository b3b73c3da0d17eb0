//! The account modes' abuse limit per client address: register, login,
//! confirm, reset-password and sign-in count against the row's capability
//! for the TCP peer, so that one address cannot try passwords or send
//! mails without end.

use crate::ctx::Ctx;
use gateway_base::body::{ClientAddr, Request};
use gateway_base::errors::ApiError;
use gateway_base::telemetry;

/// The rate-limit key of a client address: negative, so never a user id.
/// An IPv4 address (or an IPv4-mapped IPv6 one) is itself; an IPv6 address
/// counts by its first 62 bits (a client usually has a /64 or more).
pub fn address_key(ip: std::net::IpAddr) -> i64 {
    use std::net::IpAddr;
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    match ip {
        IpAddr::V4(v4) => -1 - i64::from(u32::from(v4)),
        IpAddr::V6(v6) => {
            let prefix = (u128::from(v6) >> 66) as i64; // < 2^62
            -(1i64 << 33) - prefix
        }
    }
}

/// The client's address (the server sets it on every request).
pub(super) fn client_addr(req: &Request) -> Option<std::net::IpAddr> {
    req.extensions().get::<ClientAddr>().map(|c| c.0)
}

/// Counts the request against the row's capability for the client's
/// address: 429 with `Retry-After` over the quota.
pub(super) async fn limit_address(ctx: &Ctx, req: &Request) -> Result<(), ApiError> {
    let Some(ip) = client_addr(req) else {
        return Ok(());
    };
    let capability = ctx.spec.capability;
    ctx.gw
        .limiter
        .enforce(address_key(ip), capability)
        .await
        .inspect_err(|_| telemetry::rate_limited(capability))
}
