//! Names used by generated code, so that it never depends on the caller's
//! imports. The top floor, beside `lib.rs`: nothing in the runtime imports it.

pub use crate::pipeline::handle;
pub use crate::router::{Handler, HandlerFuture, Request, RouteMatch};
pub use crate::services::Gateway;
pub use crate::spec::*;
pub use http::Method as HttpMethod;
