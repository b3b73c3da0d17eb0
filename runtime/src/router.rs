//! The interface between the generated router and the runtime.
//!
//! `codegen` emits a `route(method, path) -> RouteMatch` function and one
//! handler per row; the runtime's HTTP server ([`crate::server`]) is handed
//! that function and calls it for every request. The runtime itself knows no
//! individual route.

use std::future::Future;
use std::pin::Pin;

use crate::services::Gateway;
use gateway_base::spec::{EndpointSpec, PathParams};

pub use gateway_base::body::{Request, Response};
/// Future returned by a generated handler.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Response> + Send + 'static>>;
/// A generated per-row handler: one call into [`crate::pipeline::handle`].
pub type Handler = fn(Gateway, Request, PathParams) -> HandlerFuture;
/// The generated matcher.
pub type RouteFn = fn(&http::Method, &str) -> RouteMatch;

/// What the generated matcher found for a method and path.
pub enum RouteMatch {
    /// A row matched; its path parameters are captured (still percent-encoded).
    Found {
        spec: &'static EndpointSpec,
        handler: Handler,
        params: PathParams,
    },
    /// The path exists but not with this method; `allowed` is e.g. `"GET, POST"`.
    MethodNotAllowed { allowed: &'static str },
    /// No row has this path.
    NotFound,
}
