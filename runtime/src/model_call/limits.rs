//! Phase 4's first step: a model request counted against its `rpm` and
//! `tpm` limits ([`gateway_adapters::ratelimit::windows`]) before it is
//! held, and the limits' standing on its answer.
//!
//! The limits that apply: the API key's own (`rpm`, `tpm`: `PATCH
//! /keys/{key_id}`), and the route's per user when the request named a
//! route, else its model's (the providers file's `rpm`, `tpm`). A request
//! counts 1 and its tokens' bound (the largest of its candidates'); its
//! settlement corrects the bound to what it used. A cache hit (answered
//! before this step), a batch's line (its batch is limited when it is
//! made) and a request without a user are not counted. A request refused
//! for credit after this step (402) stays counted as a request.

use gateway_adapters::ratelimit::{Admission, Limit, Report, Unit};
use gateway_base::body::Response;
use gateway_base::errors::ApiError;
use gateway_models::bounds::Bound;
use gateway_models::providers::{Model, Provider, Route, UserLimits};

use crate::ctx::Caller;

/// Counts the request of `c` against the limits of its key and of
/// `route` (else `p`'s model `m`), its tokens the largest of its
/// candidates' `bounds`: the admission, or 429 with `Retry-After`.
pub(super) async fn admit<'b>(
    c: &Caller<'_>,
    route: Option<&Route>,
    (p, m): (&Provider, &Model),
    bounds: impl Iterator<Item = &'b Bound>,
) -> Result<Admission, ApiError> {
    let Some(user) = c.user.filter(|_| c.line.is_none()) else {
        return Ok(Admission::free());
    };
    let mut limits = Vec::new();
    if let Some(key) = user.key_id {
        let own = UserLimits {
            rpm: user.rpm,
            tpm: user.tpm,
        };
        push(&mut limits, &format!("key:{key}"), own);
    }
    match route {
        Some(r) => push(
            &mut limits,
            &format!("user:{}:route:{}", user.id, r.name),
            r.limits,
        ),
        None => push(
            &mut limits,
            &format!("user:{}:model:{}/{}", user.id, p.id, m.id),
            m.limits,
        ),
    }
    if limits.is_empty() {
        return Ok(Admission::free());
    }
    let tokens = bounds
        .map(|b| b.input.saturating_add(b.output))
        .max()
        .unwrap_or(0);
    c.gw.limiter.admit(&limits, tokens).await
}

fn push(limits: &mut Vec<Limit>, scope: &str, l: UserLimits) {
    for (unit, ceiling) in [(Unit::Requests, l.rpm), (Unit::Tokens, l.tpm)] {
        if let Some(ceiling) = ceiling {
            limits.push(Limit {
                scope: scope.to_owned(),
                unit,
                ceiling,
            });
        }
    }
}

/// OpenAI's `x-ratelimit-*` headers of `report` on `response`.
pub(super) fn annotate(response: &mut Response, report: &Report) {
    for (name, value) in report.headers() {
        if let Ok(v) = http::HeaderValue::from_str(&value) {
            response
                .headers_mut()
                .insert(http::HeaderName::from_static(name), v);
        }
    }
}
