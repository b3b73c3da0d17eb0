//! The dashboard (`GET /dashboard`): a page a signed-in person looks at.
//!
//! Three static files embedded at build time (`runtime/assets/dashboard/`)
//! and one small JSON document, `/dashboard/config.json`, telling the page
//! what this gateway offers: whether Stripe is configured, which routes the
//! table has (`"GET /api/v1/usage"`, ...) and the fixed values of their
//! query parameters, so that a section whose route (or grouping) is missing
//! says "not available" without asking for it. The page signs in
//! through `POST /api/v1/auth/login`, then hands its refresh token to
//! `POST /dashboard/session`, which keeps it in an `HttpOnly`, `Secure`,
//! `SameSite=Strict` cookie and answers the session's CSRF token: from
//! then on the page's calls carry the cookie and `X-CSRF-Token`, never a
//! token its script holds, and a reload asks `GET /dashboard/session` for
//! the CSRF token again (signed in, without a password). `DELETE
//! /dashboard/session` signs out (the refresh token revoked, the cookie
//! dropped). See `gateway_adapters::auth::session`. Everything the page
//! loads comes from here (no CDN), under a strict Content-Security-Policy
//! that allows no inline script or style.

use http::{header, HeaderValue, Method, StatusCode};
use serde_json::json;

use crate::router::Response;
use crate::services::Gateway;
use gateway_adapters::auth::session;
use gateway_adapters::auth::tokens::Typ;
use gateway_base::body;
use gateway_base::errors::ApiError;

/// The dashboard's session (see the module docs).
pub const SESSION: &str = "/dashboard/session";

/// `POST`, `GET` or `DELETE /dashboard/session`.
pub async fn session_answer(
    gw: &Gateway,
    method: &Method,
    headers: &http::HeaderMap,
) -> Result<Response, ApiError> {
    let (status, body, cookie) = match *method {
        // The refresh token, as a bearer token: the cookie set.
        Method::POST => {
            let refresh = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::trim)
                .ok_or_else(|| {
                    ApiError::Unauthorized("send the refresh token as Authorization: Bearer".into())
                })?;
            let (user, v) = gw.auth.token_user(refresh, Typ::Refresh).await?;
            let csrf = gw.auth.csrf_of(&v);
            let cookie = session::set_cookie(refresh, gw.auth.session_ttl().as_secs());
            let answer = json!({"signed_in": true, "user_id": user.id, "csrf_token": csrf});
            (StatusCode::OK, answer, Some(cookie))
        }
        // Signed in or not (a page's first question: never an error).
        Method::GET => match gw.auth.session(headers).await {
            Ok((user, _, csrf)) => (
                StatusCode::OK,
                json!({"signed_in": true, "user_id": user.id, "csrf_token": csrf}),
                None,
            ),
            // No session, or one that ended: signed out (the cookie
            // dropped). Any other failure (the database down) is answered
            // as such, the cookie kept.
            Err(ApiError::Unauthorized(_) | ApiError::Forbidden(_)) => {
                let drop = session::cookie(headers).map(|_| session::set_cookie("", 0));
                (StatusCode::OK, json!({"signed_in": false}), drop)
            }
            Err(e) => return Err(e),
        },
        // Signed out: the refresh token revoked (with the CSRF token), the cookie dropped.
        Method::DELETE => {
            let (user, v, _) = gw.auth.session(headers).await?;
            if !gw.auth.csrf_ok(headers, &v) {
                return Err(ApiError::Forbidden(
                    "X-CSRF-Token: the session's is required".into(),
                ));
            }
            gw.auth.revoke(&v, user.id).await?;
            (
                StatusCode::OK,
                json!({"signed_out": true}),
                Some(session::set_cookie("", 0)),
            )
        }
        _ => return Err(ApiError::MethodNotAllowed("GET, POST, DELETE")),
    };
    let mut r = gateway_base::body::json(status, &body);
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(c) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        h.insert(header::SET_COOKIE, c);
    }
    Ok(r)
}

/// Where the page and its files are served.
pub const PATH: &str = "/dashboard";

/// The page's Content-Security-Policy: its own scripts, styles and
/// requests only; no inline script or style, no frame, no base, forms only
/// to itself.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
img-src 'self' data:; connect-src 'self'; form-action 'self'; \
frame-ancestors 'none'; base-uri 'none'";

const INDEX: &str = include_str!("../assets/dashboard/index.html");
const APP_JS: &str = include_str!("../assets/dashboard/app.js");
const APP_CSS: &str = include_str!("../assets/dashboard/app.css");

/// Whether `path` is the dashboard's (the page or a file under it).
pub fn is_dashboard(path: &str) -> bool {
    path == PATH
        || path
            .strip_prefix(PATH)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The answer to a dashboard path, or `None` for a file it does not have
/// (the server answers 404 as for any unknown path).
pub fn answer(gw: &Gateway, path: &str) -> Option<Response> {
    let (body, content_type): (body::Body, &'static str) = match path.strip_prefix(PATH)? {
        "" => (body::full(INDEX), "text/html; charset=utf-8"),
        "/app.js" => (body::full(APP_JS), "text/javascript; charset=utf-8"),
        "/app.css" => (body::full(APP_CSS), "text/css; charset=utf-8"),
        "/config.json" => (body::full(config(gw)), "application/json"),
        _ => return None,
    };
    let mut r = http::Response::new(body);
    *r.status_mut() = StatusCode::OK;
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Some(r)
}

/// What the page may use: Stripe configured or not, every route of the
/// table as `"METHOD /path"`, and the values each query parameter with a
/// fixed set accepts (`"GET /api/v1/usage?group_by": ["day", ...]`).
fn config(gw: &Gateway) -> String {
    let mut routes = Vec::new();
    let mut choices = serde_json::Map::new();
    for r in gw.table.routes {
        let route = format!("{} {}", r.method.as_str(), r.path);
        for q in r.query.iter().filter(|q| !q.one_of.is_empty()) {
            choices.insert(format!("{route}?{}", q.name), json!(q.one_of));
        }
        routes.push(route);
    }
    json!({ "stripe": gw.stripe.configured(), "routes": routes, "choices": choices }).to_string()
}
