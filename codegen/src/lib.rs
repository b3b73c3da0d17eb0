//! `codegen::routes!`: the route table `endpoints.toml` becomes the gateway's
//! router at compile time.
//!
//! ```text
//! pub mod routes {
//!     codegen::routes!("../endpoints.toml"); // relative to CARGO_MANIFEST_DIR
//! }
//! // or, for fixtures: codegen::routes!(inline = r#"...toml..."#);
//! ```
//!
//! The expansion defines, in the invoking module: one `pub static` per row
//! (`tts.synthesize` → `TTS_SYNTHESIZE: EndpointSpec`),
//! `ROUTES: &[&EndpointSpec]`, `ROUTE_COUNT: usize`, the whole-table facts
//! `CAPABILITIES: &[Capability]`, `JOB_KINDS: &[JobKind]`,
//! `BASES: &[BaseSpec]` and `TABLE: Table` (the four together), one thin
//! handler per row and `pub fn route(&HttpMethod, &str) -> RouteMatch`. A problem in the table
//! is a compile error naming the row and its line; every problem is
//! reported, not only the first.
//!
//! # Layout
//!
//! This crate is only the entry point. The generator is the ordinary
//! library `codegen-impl` (table model, validation, expansion), which is
//! tested without the compiler; `tests/` here holds the compile-fail
//! fixtures (`trybuild`) and tests of the generated matcher against a small
//! stand-in for the runtime.

use proc_macro::TokenStream;

/// Generates the router from a route table. See the crate documentation.
#[proc_macro]
pub fn routes(input: TokenStream) -> TokenStream {
    codegen_impl::routes_macro(input.into()).into()
}
