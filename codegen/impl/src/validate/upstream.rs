//! A row's `upstream`: its base, and the sources of its path template's
//! placeholders (route parameters, `from_query`, `from_body`, `from_parent`).

use std::collections::BTreeSet;

use super::problems::RowCx;
use crate::table::*;
use crate::validate::document::Document;
use crate::validate::fields::rule;
use crate::validate::paths::template_vars;

/// A row's body and query rules, for the upstream checks.
pub(super) struct Rules<'a> {
    pub body: &'a [FieldRule],
    pub query: &'a [FieldRule],
}

/// The upstream call: its base and its path template. `params` is `None`
/// when the route's path is invalid (its problems are reported already).
pub(super) fn resolve_upstream(
    cx: &mut RowCx<'_, '_>,
    raw: &RawEndpoint,
    doc: &Document,
    params: Option<&[String]>,
    rules: &Rules<'_>,
) -> Option<Upstream> {
    let up = raw.upstream.as_ref()?;
    let base = doc.bases.iter().find(|b| b.name == up.base);
    if base.is_none() && !doc.broken_bases.contains(&up.base) {
        cx.err(
            &["upstream", "base"],
            format!("base `{}` is not declared in `[bases]`", up.base),
        );
    }
    match template_vars(&up.path) {
        Err(problems) => {
            for p in problems {
                cx.err(&["upstream", "path"], p);
            }
        }
        Ok(vars) => {
            check_template_vars(cx, up, &vars, params);
            let route_params = params.unwrap_or_default();
            check_upstream_lists(cx, raw, doc, up, &vars, route_params, rules);
            check_from_parent(cx, raw, doc, up, &vars, route_params);
            if raw.mode.is_some_and(Mode::forwards_path) {
                check_forwarded_params(cx, raw, up, &vars, route_params);
            }
        }
    }
    base.map(|base| Upstream {
        base: up.base,
        method: up.method,
        path: up.path.clone(),
        from_query: up.from_query.clone(),
        from_body: up.from_body.clone(),
        from_parent: up.from_parent.clone(),
        auth: base.auth,
    })
}

/// Every placeholder of the upstream path has a source.
fn check_template_vars(
    cx: &mut RowCx<'_, '_>,
    up: &RawUpstream,
    vars: &[String],
    params: Option<&[String]>,
) {
    let Some(route_params) = params else {
        return;
    };
    for var in vars {
        let known = route_params.contains(var)
            || up.from_query.contains(var)
            || up.from_body.contains(var)
            || up.from_parent.contains(var);
        if !known {
            cx.err(
                &["upstream", "path"],
                format!(
                    "upstream path `{}` uses `{{{var}}}`, which is neither a path parameter of the route nor listed in `from_query`/`from_body`/`from_parent`",
                    up.path
                ),
            );
        }
    }
}

/// `from_query` and `from_body`: each name once, used by the template, not
/// a path parameter, and declared as required in its section. Two
/// exceptions: in `fields` mode a `from_body` name is a field of the `fields`
/// object (the runtime requires it); a list row (GET of its `resource`'s
/// collection) may declare a `from_query` name of an owned kind optional:
/// without it, the caller's resources of that kind are each listed.
fn check_upstream_lists(
    cx: &mut RowCx<'_, '_>,
    raw: &RawEndpoint,
    doc: &Document,
    up: &RawUpstream,
    vars: &[String],
    route_params: &[String],
    rules: &Rules<'_>,
) {
    for (list, names, section, rules) in [
        ("from_query", &up.from_query, "query", rules.query),
        ("from_body", &up.from_body, "body", rules.body),
    ] {
        let at = ["upstream", list];
        let mut seen = BTreeSet::new();
        for name in names {
            if !seen.insert(name) {
                cx.err(&at, format!("`{list}` lists `{name}` twice"));
                continue;
            }
            if !vars.contains(name) {
                cx.err(
                    &at,
                    format!(
                        "`{list}` lists `{name}`, which the upstream path `{}` does not use",
                        up.path
                    ),
                );
                continue;
            }
            if route_params.contains(name) {
                cx.err(
                    &at,
                    format!(
                        "`{list}` lists `{name}`, which is already a path parameter of the route"
                    ),
                );
            }
            if list == "from_query" && up.from_body.contains(name) {
                cx.err(
                    &at,
                    format!("`{name}` is listed in both `from_query` and `from_body`"),
                );
            }
            let envelope = list == "from_body" && raw.mode == Some(Mode::Fields);
            let fan_out = list == "from_query"
                && raw.resource.is_some()
                && raw.method == Some(Method::Get)
                && !raw.path.as_deref().unwrap_or_default().ends_with('}')
                && doc.resources.iter().any(|(p, _)| p == name)
                && rule(rules, name).is_some();
            if !envelope && !fan_out && !rule(rules, name).is_some_and(|r| r.required) {
                cx.err(
                    &at,
                    format!(
                        "`{list}` lists `{name}`, so `[endpoint.{section}]` must declare it as required (`{name} = {{ type = \"string\", required = true }}`)"
                    ),
                );
            }
        }
    }
}

/// Modes that forward the route as it is use every path parameter upstream.
fn check_forwarded_params(
    cx: &mut RowCx<'_, '_>,
    raw: &RawEndpoint,
    up: &RawUpstream,
    vars: &[String],
    route_params: &[String],
) {
    for p in route_params {
        if !vars.contains(p) {
            cx.err(
                &["upstream", "path"],
                format!(
                    "path parameter `{{{p}}}` is not used by the upstream path `{}` (mode `{}` forwards the route as it is)",
                    up.path,
                    raw.mode.map(Mode::as_str).unwrap_or_default()
                ),
            );
        }
    }
}

/// `from_parent`: each name used by the template, not otherwise sourced, a
/// parameter of `[resources]` (the parent's kind), on a row that addresses
/// its own `resource` through its last path parameter.
fn check_from_parent(
    cx: &mut RowCx<'_, '_>,
    raw: &RawEndpoint,
    doc: &Document,
    up: &RawUpstream,
    vars: &[String],
    route_params: &[String],
) {
    let at = ["upstream", "from_parent"];
    let addresses_own =
        raw.resource.is_some() && raw.path.as_deref().unwrap_or_default().ends_with('}');
    for name in &up.from_parent {
        if !vars.contains(name) {
            cx.err(
                &at,
                format!(
                    "`from_parent` lists `{name}`, which the upstream path `{}` does not use",
                    up.path
                ),
            );
        } else if route_params.contains(name)
            || up.from_query.contains(name)
            || up.from_body.contains(name)
        {
            cx.err(
                &at,
                format!("`{name}` has another source than `from_parent`"),
            );
        }
        if !doc.resources.iter().any(|(p, _)| p == name) {
            cx.err(
                &at,
                format!("`from_parent` lists `{name}`, which is not a parameter of `[resources]` (the parent's kind)"),
            );
        }
        if !addresses_own {
            cx.err(
                &at,
                "`from_parent` needs a row that addresses its own `resource` through its last path parameter",
            );
        }
    }
}
