//! The generator behind `codegen::routes!`: `endpoints.toml` → router,
//! handlers, `ROUTES` and `TABLE`.
//!
//! This is an ordinary library (progenitor / dropshot style): the proc-macro
//! crate `codegen` only forwards its input to [`routes_macro`], and
//! everything here is unit-tested without the compiler. The same
//! [`parse_table`] runs at compile time (inside the macro) and at run time
//! (in tests), so a test can parse the table and compare it with what was
//! generated (sqlx style).
//!
//! # Layout
//!
//! * [`keywords`]: the keyword enums of the table, `gateway-spec`'s own (the
//!   types the generated code is made of, declared once).
//! * [`table`]: the data model. The raw serde layer (`#[serde(deny_unknown_fields)]`,
//!   one enum per keyword: method, mode, billing, gate, auth, errors, base,
//!   field type) and the resolved layer ([`Table`], [`Row`], capabilities
//!   with their quotas, job kinds) with every default applied.
//! * [`validate`]: text → [`Table`], or *every* problem as a [`TableError`]
//!   carrying the row id and the 1-based line. Rows are read one by one from
//!   `toml::Value`, so one bad row never hides another. One module per part:
//!   the sections outside the rows, one row, its upstream, its fields, paths,
//!   and the checks across rows.
//! * [`expand`](mod@expand): [`Table`] → tokens: one `static EndpointSpec`
//!   per row, `ROUTES`, `ROUTE_COUNT`, `CAPABILITIES`, `JOB_KINDS`, `BASES`,
//!   `TABLE`, one thin handler per row, and the `route` matcher. Generated code holds no logic and names everything
//!   through `::runtime::__private`.
//! * [`openapi`]: [`Table`] → the OpenAPI 3.1 document (data), embedded by
//!   the expansion as `OPENAPI_JSON` and served by the runtime.
//! * [`docs`]: the OpenAPI document → the `/docs` HTML page (data, `DOCS_HTML`).
//! * this file: the public API and [`routes_macro`], which reads the macro's
//!   input (`"path/relative/to/CARGO_MANIFEST_DIR"` or `inline = "..."`)
//!   and turns problems into one `compile_error!` each.
//!
//! Architecture invariant: the generated code and the runtime agree on the
//! shape of `runtime::spec`, which is `gateway-spec`, the crate whose
//! keyword enums the table is read into; [`Row::listing_line`] uses the same
//! format as `EndpointSpec::listing_line`.

pub mod docs;
pub mod expand;
pub mod keywords;
pub mod links;
pub mod openapi;
pub mod table;
pub mod validate;

use std::path::{Path, PathBuf};

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::parse::{Parse, ParseStream};
use syn::LitStr;

pub use expand::expand;
pub use table::{CapabilityDef, FieldRule, JobKindDef, Quota, Row, Table, Upstream};
pub use validate::{parse_table, TableError, MAX_PARAMS};

/// Where the macro's table comes from.
#[derive(Clone)]
pub enum Source {
    /// `routes!("../endpoints.toml")`: a path relative to the invoking
    /// crate's `CARGO_MANIFEST_DIR`.
    File(LitStr),
    /// `routes!(inline = r#"..."#)`: the table itself (test fixtures).
    Inline(LitStr),
}

impl Parse for Source {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let source = if input.peek(LitStr) {
            Source::File(input.parse()?)
        } else if input.peek(syn::Ident) {
            let key: syn::Ident = input.parse()?;
            if key != "inline" {
                return Err(syn::Error::new(
                    key.span(),
                    "expected `inline = \"...\"` or a path string",
                ));
            }
            input.parse::<syn::Token![=]>()?;
            Source::Inline(input.parse()?)
        } else {
            return Err(input.error(
                "expected the table's path (`routes!(\"../endpoints.toml\")`) or `inline = r#\"...\"#`",
            ));
        };
        if input.peek(syn::Token![,]) {
            input.parse::<syn::Token![,]>()?;
        }
        if !input.is_empty() {
            return Err(input.error("unexpected tokens after the table"));
        }
        Ok(source)
    }
}

/// One `compile_error!` per problem, at `span`, then the [`skeleton`]:
/// the only errors a maintainer sees are the table's own. `file` names the
/// table in the messages.
pub fn errors_to_tokens(errors: &[TableError], file: &str, span: Span) -> TokenStream {
    let errors = errors.iter().map(|e| {
        let message = e.render(Some(file));
        syn::Error::new(span, message).to_compile_error()
    });
    let skeleton = skeleton();
    quote!(#(#errors)* #skeleton)
}

/// What the expansion of a table without rows defines (`ROUTES`, `TABLE`,
/// `route`, ... all empty): emitted next to a broken table's errors so that
/// the code using the routes module still resolves every name, and adds no
/// unresolved-name errors of its own.
pub fn skeleton() -> TokenStream {
    expand(&Table::default(), None)
}

/// Resolves a macro path against the invoking crate's manifest directory.
fn resolve(relative: &str) -> Result<PathBuf, String> {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR").ok_or_else(|| {
        "CARGO_MANIFEST_DIR is not set (is this running under cargo?)".to_string()
    })?;
    let path = Path::new(&dir).join(relative);
    // The message names the path as written (relative to the crate's
    // manifest): an absolute path would differ between checkouts.
    path.canonicalize().map_err(|e| {
        format!(
            "cannot read the route table `{relative}` (relative to the crate's Cargo.toml): {e}"
        )
    })
}

/// One error at `span`, and the [`skeleton`].
fn errors_at(span: Span, message: String) -> TokenStream {
    let error = syn::Error::new(span, message).to_compile_error();
    let skeleton = skeleton();
    quote!(#error #skeleton)
}

/// The whole macro: parse the input, read and check the table, expand.
pub fn routes_macro(input: TokenStream) -> TokenStream {
    let source = match syn::parse2::<Source>(input) {
        Ok(s) => s,
        // Not a table at all: the invocation is the problem (no skeleton).
        Err(e) => return e.to_compile_error(),
    };
    match source {
        Source::Inline(lit) => match parse_table(&lit.value()) {
            Ok(table) => expand(&table, None),
            Err(errors) => errors_to_tokens(&errors, "inline table", lit.span()),
        },
        Source::File(lit) => {
            let path = match resolve(&lit.value()) {
                Ok(p) => p,
                Err(msg) => return errors_at(lit.span(), msg),
            };
            let Some(path_str) = path.to_str() else {
                return errors_at(
                    lit.span(),
                    format!("the path `{}` is not UTF-8", path.display()),
                );
            };
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) => {
                    return errors_at(
                        lit.span(),
                        format!("cannot read the route table `{path_str}`: {e}"),
                    )
                }
            };
            match parse_table(&text) {
                Ok(table) => expand(&table, Some(path_str)),
                Err(errors) => {
                    // Keep cargo watching the file while it is broken, too.
                    let errors = errors_to_tokens(&errors, path_str, lit.span());
                    quote! {
                        const _: &str = ::core::include_str!(#path_str);
                        #errors
                    }
                }
            }
        }
    }
}
