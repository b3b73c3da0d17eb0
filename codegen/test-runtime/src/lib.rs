//! A stand-in for the `runtime` crate, used only by `codegen`'s tests.
//!
//! The generated code names everything through `::runtime::__private`. The
//! real runtime pulls in hyper, reqwest and SQLite, which would make every
//! `trybuild` fixture build (in its own target directory) slow, so codegen's
//! tests depend on this crate under the name `runtime` instead.
//!
//! Its `spec` is the *real* one (the `gateway-spec` crate the runtime
//! re-exports as `runtime::spec`), so the generated statics are checked
//! against the real `EndpointSpec`; only the request, response and handler
//! types are stubs.
//! Whether the expansion fits the real router types is checked by building
//! the `server` crate.

pub use gateway_spec as spec;

/// Stub of `runtime::router`: same shapes, simpler request and response.
pub mod router {
    use std::future::Future;
    use std::pin::Pin;

    use crate::spec::{EndpointSpec, PathParams};
    use crate::Gateway;

    /// Requests carry nothing here.
    pub type Request = ();
    /// The stub pipeline answers with a line of text.
    pub type Response = String;
    pub type HandlerFuture = Pin<Box<dyn Future<Output = Response> + Send + 'static>>;
    pub type Handler = fn(Gateway, Request, PathParams) -> HandlerFuture;

    /// Same variants as `runtime::router::RouteMatch`.
    pub enum RouteMatch {
        Found {
            spec: &'static EndpointSpec,
            handler: Handler,
            params: PathParams,
        },
        MethodNotAllowed {
            allowed: &'static str,
        },
        NotFound,
    }
}

/// Stub of `runtime::pipeline`.
pub mod pipeline {
    use crate::router::{Request, Response};
    use crate::spec::{EndpointSpec, PathParams};
    use crate::Gateway;

    /// Answers `"<row id> name=value ..."` (parameters as captured).
    pub async fn handle(
        spec: &'static EndpointSpec,
        _gw: Gateway,
        _req: Request,
        params: PathParams,
    ) -> Response {
        let mut out = spec.id.to_string();
        for (name, raw) in params.iter() {
            out.push_str(&format!(" {name}={raw}"));
        }
        out
    }
}

/// Stub of the gateway state.
#[derive(Clone, Default)]
pub struct Gateway {}

/// The names generated code uses (same list as the real runtime's).
#[doc(hidden)]
pub mod __private {
    pub use crate::router::{Handler, HandlerFuture, Request, RouteMatch};
    pub use crate::spec::*;
    pub use crate::Gateway;
    pub use http::Method as HttpMethod;

    /// The pipeline's future, boxed (as the real runtime's).
    pub fn handle(
        spec: &'static EndpointSpec,
        gw: Gateway,
        req: Request,
        params: PathParams,
    ) -> HandlerFuture {
        Box::pin(crate::pipeline::handle(spec, gw, req, params))
    }
}
