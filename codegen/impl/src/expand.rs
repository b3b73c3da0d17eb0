//! Token generation: a validated [`Table`] → the items of the routes module.
//!
//! The output holds data and dispatch only, no behaviour:
//!
//! 1. `const _: &str = include_str!("<table>");` so cargo rebuilds when the
//!    table changes;
//! 2. one `pub static <ROW>: EndpointSpec` per row;
//! 3. `pub static ROUTES: &[&EndpointSpec]` (table order) and
//!    `pub const ROUTE_COUNT: usize`;
//! 4. the whole-table facts, as data: `pub static CAPABILITIES: &[Capability]`
//!    (`[capabilities]`, table order), `pub static JOB_KINDS: &[JobKind]`
//!    (one per job kind, in order of first appearance: its `job_submit` row,
//!    its `job_get` row and that row's `mirror`), `pub static BASES:
//!    &[BaseSpec]` (`[bases.*]`, table order), and `pub static TABLE: Table`
//!    holding the four and `pub static OPENAPI_JSON: &str` (the OpenAPI
//!    document, [`crate::openapi`], as text) and `pub static DOCS_HTML: &str`
//!    (the `/docs` page, [`crate::docs`]);
//! 5. one `fn handle_<row>` per row: a single call to the runtime's `handle`;
//! 6. `pub fn route(method, path) -> RouteMatch`: a `match` over the path's
//!    segments, one arm per distinct path shape, then a `match` on the
//!    method.
//!
//! Every name is spelled `::runtime::__private::...`, so the generated code
//! never depends on the caller's imports.

use proc_macro2::{Literal, TokenStream};
use quote::{format_ident, quote, ToTokens};

use crate::table::*;

/// The hidden re-export module of the runtime.
fn rt() -> TokenStream {
    quote!(::runtime::__private)
}

fn some_or_none<T: ToTokens>(value: Option<T>) -> TokenStream {
    match value {
        Some(v) => quote!(::core::option::Option::Some(#v)),
        None => quote!(::core::option::Option::None),
    }
}

/// `::runtime::__private::<Type>::<Variant>`.
fn variant(ty: &str, name: &str) -> TokenStream {
    let rt = rt();
    let ty = format_ident!("{}", ty);
    let name = format_ident!("{}", name);
    quote!(#rt::#ty::#name)
}

/// A keyword value: `::runtime::__private::<Type>::<Variant>`.
fn kw<K: Keyword>(k: K) -> TokenStream {
    variant(K::RUST_TYPE, k.rust_name())
}

fn u32_lit(v: u32) -> Literal {
    Literal::u32_unsuffixed(v)
}

/// An `f64` expression (negative values as `-lit`, which tokens need).
fn f64_expr(v: f64) -> TokenStream {
    let lit = Literal::f64_unsuffixed(v.abs());
    if v.is_sign_negative() && v != 0.0 {
        quote!(-#lit)
    } else {
        quote!(#lit)
    }
}

fn str_slice(items: &[String]) -> TokenStream {
    quote!(&[#(#items),*])
}

fn field_rules(rules: &[FieldRule]) -> TokenStream {
    let rt = rt();
    let rules = rules.iter().map(|r| {
        let FieldRule {
            name, ty, required, ..
        } = r;
        let max_len = some_or_none(r.max_len.map(u32_lit));
        let min = some_or_none(r.min.map(f64_expr));
        let max = some_or_none(r.max.map(f64_expr));
        let one_of = str_slice(&r.one_of);
        let ty = kw(*ty);
        quote! {
            #rt::FieldRule {
                name: #name,
                ty: #ty,
                required: #required,
                max_len: #max_len,
                min: #min,
                max: #max,
                one_of: #one_of,
            }
        }
    });
    quote!(&[#(#rules),*])
}

/// The `pub static` of one row.
fn row_static(row: &Row) -> TokenStream {
    let rt = rt();
    let name = format_ident!("{}", row.static_name());
    let Row {
        id,
        area,
        method,
        path,
        mode,
        capability,
        billing,
        auth,
        errors,
        summary,
        ..
    } = row;
    let params = str_slice(&row.params);
    let metering = row.metering;
    let upstream = some_or_none(row.upstream.as_ref().map(|u| {
        let Upstream {
            base,
            method,
            path,
            auth,
            ..
        } = u;
        let (base, method, auth) = (kw(*base), kw(*method), kw(*auth));
        let from_query = str_slice(&u.from_query);
        let from_body = str_slice(&u.from_body);
        let from_parent = str_slice(&u.from_parent);
        quote! {
            #rt::Upstream {
                base: #base,
                method: #method,
                path: #path,
                from_query: #from_query,
                from_body: #from_body,
                from_parent: #from_parent,
                auth: #auth,
            }
        }
    }));
    let body = field_rules(&row.body);
    let query = field_rules(&row.query);
    let rename = row
        .rename
        .iter()
        .map(|(from, to)| quote!(#rt::Rename { from: #from, to: #to }));
    let drop = str_slice(&row.drop);
    let set = some_or_none(row.set.as_deref());
    let file_field = some_or_none(row.file_field.as_deref());
    let job = some_or_none(row.job.as_deref());
    let mirror = some_or_none(row.mirror.as_deref());
    let resource = some_or_none(row.resource.as_deref());
    let owner_checks = row
        .owner_checks
        .iter()
        .map(|(param, kind)| quote!(#rt::OwnerCheck { param: #param, kind: #kind }));
    let retention_days = some_or_none(row.retention_days.map(u32_lit));
    let translate = row.translate;
    let doc = if summary.is_empty() {
        format!(" `{method} {path}` (row `{id}`).")
    } else {
        format!(" `{method} {path}`: {summary} (row `{id}`).")
    };
    let (area, method, mode, billing, metering, auth, errors) = (
        kw(*area),
        kw(*method),
        kw(*mode),
        kw(*billing),
        kw(metering),
        kw(*auth),
        kw(*errors),
    );
    let gate = some_or_none(row.gate.map(kw));
    quote! {
        #[doc = #doc]
        pub static #name: #rt::EndpointSpec = #rt::EndpointSpec {
            id: #id,
            area: #area,
            method: #method,
            path: #path,
            params: #params,
            mode: #mode,
            capability: #capability,
            billing: #billing,
            metering: #metering,
            resource: #resource,
            owner_checks: &[#(#owner_checks),*],
            gate: #gate,
            auth: #auth,
            errors: #errors,
            upstream: #upstream,
            body: #body,
            query: #query,
            rename: &[#(#rename),*],
            drop: #drop,
            set: #set,
            file_field: #file_field,
            job: #job,
            mirror: #mirror,
            retention_days: #retention_days,
            translate: #translate,
            summary: #summary,
        };
    }
}

/// `CAPABILITIES`, `JOB_KINDS`, `BASES` and `TABLE`: what spans rows, as data.
fn table_facts(table: &Table) -> TokenStream {
    let rt = rt();
    let capabilities = table.capabilities.iter().map(|c| {
        let name = &c.name;
        let quota = some_or_none(c.quota.map(|q| {
            let count = u32_lit(q.count);
            let per_secs = Literal::u64_unsuffixed(q.per_secs);
            quote!(#rt::QuotaSpec { count: #count, per_secs: #per_secs })
        }));
        quote!(#rt::Capability { name: #name, quota: #quota })
    });
    let spec = |row: &Row| {
        let name = format_ident!("{}", row.static_name());
        quote!(&#name)
    };
    let job_kinds = table.job_kinds().into_iter().map(|k| {
        let kind = k.kind;
        let submit = spec(k.submit);
        let get = some_or_none(k.get.map(spec));
        let mirror = some_or_none(k.mirror());
        let ceiling = some_or_none(table.job_ceiling(k.kind).map(u32_lit));
        quote!(#rt::JobKind { kind: #kind, submit: #submit, get: #get, mirror: #mirror, ceiling: #ceiling })
    });
    let bases = table.bases.iter().map(|b| {
        let BaseDef { name, auth } = b;
        let (name, auth) = (kw(*name), kw(*auth));
        quote!(#rt::BaseSpec { base: #name, auth: #auth })
    });
    let areas = table.areas.iter().map(|a| {
        let area = kw(a.name);
        let prefix = &a.prefix;
        // Validation makes sure every row has an error format; an area
        // without a default answers unmatched paths like `[unmatched]`.
        let errors = kw(a
            .errors
            .or(table.unmatched_errors)
            .unwrap_or(ErrorFormat::Detail));
        quote!(#rt::AreaSpec { area: #area, prefix: #prefix, errors: #errors })
    });
    let unmatched = kw(table.unmatched_errors.unwrap_or(ErrorFormat::Detail));
    let kinds = table.kinds.iter().map(|k| {
        let KindDef {
            kind, shared_stock, ..
        } = k;
        let id_field = some_or_none(k.id_field.as_deref());
        quote!(#rt::KindSpec { kind: #kind, shared_stock: #shared_stock, id_field: #id_field })
    });
    let limits = table.limits.iter().map(|(mode, bytes)| {
        let mode = kw(*mode);
        let bytes = Literal::u64_unsuffixed(*bytes);
        quote!(#rt::LimitSpec { mode: #mode, bytes: #bytes })
    });
    let purposes = table.purposes.iter().map(|p| {
        let PurposeDef { name, prefix, class, default, .. } = p;
        let retention_days = some_or_none(p.retention_days.map(u32_lit));
        quote!(#rt::PurposeSpec { name: #name, prefix: #prefix, class: #class, retention_days: #retention_days, default: #default })
    });
    let prices = table
        .prices
        .iter()
        .map(|(key, price)| quote!(#rt::PriceSpec { key: #key, price: #price }));
    let upstream_products = table
        .upstream_products
        .iter()
        .map(|(product, unit, upstream)| {
            let unit = kw(*unit);
            quote!(#rt::UpstreamProduct { product: #product, unit: #unit, upstream: #upstream })
        });
    let unit_products = table.unit_products.iter().map(|(unit, product)| {
        let unit = kw(*unit);
        quote!(#rt::UnitProduct { unit: #unit, product: #product })
    });
    quote! {
        /// `[capabilities]`: every rate-limit bucket with its default quota, in table order.
        pub static CAPABILITIES: &[#rt::Capability] = &[#(#capabilities),*];

        /// One entry per job kind, in order of first appearance in the table.
        pub static JOB_KINDS: &[#rt::JobKind] = &[#(#job_kinds),*];

        /// `[bases.*]`: how the provider key is presented to each base, in table order.
        pub static BASES: &[#rt::BaseSpec] = &[#(#bases),*];

        /// The whole table: [`ROUTES`], [`CAPABILITIES`], [`JOB_KINDS`] and [`BASES`].
        pub static TABLE: #rt::Table = #rt::Table {
            routes: ROUTES,
            capabilities: CAPABILITIES,
            job_kinds: JOB_KINDS,
            bases: BASES,
            openapi: OPENAPI_JSON,
            docs: DOCS_HTML,
            areas: &[#(#areas),*],
            unmatched_errors: #unmatched,
            kinds: &[#(#kinds),*],
            limits: &[#(#limits),*],
            purposes: &[#(#purposes),*],
            prices: &[#(#prices),*],
            upstream_products: &[#(#upstream_products),*],
            unit_products: &[#(#unit_products),*],
        };
    }
}

/// The thin handler of one row: one call into the runtime.
fn row_handler(row: &Row) -> TokenStream {
    let rt = rt();
    let name = format_ident!("{}", row.static_name());
    let handler = format_ident!("{}", row.handler_name());
    quote! {
        fn #handler(
            gw: #rt::Gateway,
            req: #rt::Request,
            params: #rt::PathParams,
        ) -> #rt::HandlerFuture {
            #rt::handle(&#name, gw, req, params)
        }
    }
}

/// Key of a path shape in the matcher: static segments sort before
/// parameters at every position, so a more specific arm always comes first
/// and no arm is ever shadowed (an earlier arm can only cover a later one if
/// it has a parameter where the later one has a static segment, and then it
/// would have sorted after it).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum ShapeSeg<'a> {
    Static(&'a str),
    Param,
    /// A `{name*}` tail: one segment or more, the path's last.
    Tail,
}

/// Most segments a `{name*}` tail takes (a longer path is not found).
const TAIL_SEGMENTS: usize = 16;

/// Distinct path shapes, most specific first, each with its rows sorted by method.
fn shapes(table: &Table) -> Vec<(Vec<ShapeSeg<'_>>, Vec<&Row>)> {
    let mut map: std::collections::BTreeMap<Vec<ShapeSeg<'_>>, Vec<&Row>> = Default::default();
    for row in &table.rows {
        let shape = row
            .segments()
            .into_iter()
            .map(|s| match s {
                Segment::Static(s) => ShapeSeg::Static(s),
                Segment::Param(_) => ShapeSeg::Param,
                Segment::Tail(_) => ShapeSeg::Tail,
            })
            .collect();
        map.entry(shape).or_default().push(row);
    }
    map.into_iter()
        .map(|(shape, mut rows)| {
            rows.sort_by_key(|r| r.method);
            (shape, rows)
        })
        .collect()
}

/// The generated `route` function.
fn router(table: &Table) -> TokenStream {
    let rt = rt();
    let shapes = shapes(table);
    let max_segments = shapes
        .iter()
        .map(|(s, _)| match s.last() {
            Some(ShapeSeg::Tail) => s.len() - 1 + TAIL_SEGMENTS,
            _ => s.len(),
        })
        .max()
        .unwrap_or(0)
        .max(1);
    let arms = shapes.iter().map(|(shape, rows)| {
        let mut param = 0usize;
        let tail = shape.last() == Some(&ShapeSeg::Tail);
        let pattern: Vec<TokenStream> = shape
            .iter()
            .map(|seg| match seg {
                ShapeSeg::Static(s) => quote!(#s),
                ShapeSeg::Param => {
                    let p = format_ident!("p{}", param);
                    param += 1;
                    quote!(#p)
                }
                ShapeSeg::Tail => {
                    let p = format_ident!("p{}", param);
                    param += 1;
                    quote!(#p @ ..)
                }
            })
            .collect();
        let guard = tail.then(|| {
            let p = format_ident!("p{}", param - 1);
            quote!(if !#p.is_empty())
        });
        let methods = rows.iter().map(|row| {
            let http = format_ident!("{}", row.method.as_str());
            let spec = format_ident!("{}", row.static_name());
            let handler = format_ident!("{}", row.handler_name());
            let params = if row.params.is_empty() {
                quote!(#rt::PathParams::new())
            } else {
                let last = row.params.len() - 1;
                let pushes = row.params.iter().enumerate().map(|(i, name)| {
                    let p = format_ident!("p{}", i);
                    if tail && i == last {
                        quote!(params.push_joined(#name, #p);)
                    } else {
                        quote!(params.push(#name, #p);)
                    }
                });
                quote!({
                    let mut params = #rt::PathParams::new();
                    #(#pushes)*
                    params
                })
            };
            quote! {
                #rt::HttpMethod::#http => #rt::RouteMatch::Found {
                    spec: &#spec,
                    handler: #handler,
                    params: #params,
                },
            }
        });
        let allowed = rows
            .iter()
            .map(|r| r.method.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        quote! {
            [#(#pattern),*] #guard => match *method {
                #(#methods)*
                _ => #rt::RouteMatch::MethodNotAllowed { allowed: #allowed },
            },
        }
    });
    let max_segments = Literal::usize_unsuffixed(max_segments);
    quote! {
        /// Finds the row for a request: `path` is the URI's path (no query
        /// string), still percent-encoded. One trailing `/` is ignored; an
        /// empty segment never matches. The most specific path shape wins
        /// (static segments before parameters, parameters before a tail
        /// `{name*}`, leftmost first; a tail takes one segment or more, its
        /// value the segments joined by `/`), then the
        /// method is matched: a method that shape lacks is a 405, never a
        /// fall-back to a less specific shape. Allocates nothing but the
        /// captured parameters.
        pub fn route(method: &#rt::HttpMethod, path: &str) -> #rt::RouteMatch {
            const MAX_SEGMENTS: usize = #max_segments;
            let ::core::option::Option::Some(rest) = path.strip_prefix('/') else {
                return #rt::RouteMatch::NotFound;
            };
            let rest = rest.strip_suffix('/').unwrap_or(rest);
            let mut segs: [&str; MAX_SEGMENTS] = [""; MAX_SEGMENTS];
            let mut n = 0usize;
            if !rest.is_empty() {
                for seg in rest.split('/') {
                    if seg.is_empty() || n == MAX_SEGMENTS {
                        return #rt::RouteMatch::NotFound;
                    }
                    segs[n] = seg;
                    n += 1;
                }
            }
            let _ = method; // an empty table matches no method
            match &segs[..n] {
                #(#arms)*
                _ => #rt::RouteMatch::NotFound,
            }
        }
    }
}

/// The items of the routes module for a validated table. `source_path`,
/// when given, is the table's absolute path, for the `include_str!` that
/// makes cargo rebuild when the table changes.
pub fn expand(table: &Table, source_path: Option<&str>) -> TokenStream {
    let rt = rt();
    let include = source_path.map(|p| {
        quote!(
            const _: &str = ::core::include_str!(#p);
        )
    });
    let statics = table.rows.iter().map(row_static);
    let handlers = table.rows.iter().map(row_handler);
    let names = table
        .rows
        .iter()
        .map(|r| format_ident!("{}", r.static_name()));
    let count = Literal::usize_unsuffixed(table.rows.len());
    let facts = table_facts(table);
    let document = crate::openapi::document(table);
    let openapi = document.to_string();
    let docs = crate::docs::page(&document);
    let router = router(table);
    quote! {
        #include

        #(#statics)*

        /// Every row of the route table, in table order.
        pub static ROUTES: &[&#rt::EndpointSpec] = &[#(&#names),*];

        /// Number of rows in [`ROUTES`].
        pub const ROUTE_COUNT: usize = #count;

        /// The OpenAPI 3.1 document of the table (JSON text), served at `/openapi.json`.
        pub static OPENAPI_JSON: &str = #openapi;

        /// The `/docs` page: HTML rendered from [`OPENAPI_JSON`]'s document.
        pub static DOCS_HTML: &str = #docs;

        #facts

        #(#handlers)*

        #router
    }
}
