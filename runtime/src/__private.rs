//! Names used by generated code, so that it never depends on the caller's
//! imports. The top floor, beside `lib.rs`: nothing in the runtime imports it.

pub use crate::router::{Handler, HandlerFuture, Request, RouteMatch};
pub use crate::services::Gateway;
pub use gateway_base::spec::*;
pub use http::Method as HttpMethod;

/// The pipeline's future ([`crate::pipeline::handle`]) of one row, boxed as
/// every handler answers it. Boxed here, not in the generated code: the
/// crate holding the routes then compiles no async code and proves nothing
/// about the pipeline's future (that it is `Send`), which keeps a table
/// edit's rebuild short (CONTRIBUTING.md, "How to add an upstream endpoint").
pub fn handle(
    spec: &'static EndpointSpec,
    gw: Gateway,
    req: Request,
    params: PathParams,
) -> HandlerFuture {
    Box::pin(crate::pipeline::handle(spec, gw, req, params))
}
