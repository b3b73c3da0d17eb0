//! Route paths, area prefixes and upstream path templates: the checks on
//! one path string, with no knowledge of the row it belongs to.

/// A Rust-style identifier: a letter or `_`, then letters, digits and `_`
/// (`_` alone is not one).
pub(super) fn is_ident(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    name != "_" && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Characters allowed in a static path segment: RFC 3986 `pchar` without
/// percent-encoding (the matcher compares raw request segments).
pub(super) fn static_segment_problem(seg: &str) -> Option<String> {
    if seg.is_empty() {
        return Some("empty segment (`//`)".to_string());
    }
    if let Some(bad) = seg
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:@".contains(*c)))
    {
        return Some(format!(
            "segment `{seg}` contains `{bad}`, which is not allowed in a route path"
        ));
    }
    None
}

/// Checks a row's path; returns its parameter names, or the problems.
pub(super) fn check_route_path(path: &str) -> Result<Vec<String>, Vec<String>> {
    let Some(rest) = path.strip_prefix('/') else {
        return Err(vec![format!("path `{path}` must start with `/`")]);
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let mut params: Vec<String> = Vec::new();
    let mut problems = Vec::new();
    if rest.is_empty() {
        return Ok(params);
    }
    let count = rest.split('/').count();
    for (i, seg) in rest.split('/').enumerate() {
        if seg.contains(['{', '}']) {
            let inner = seg.strip_prefix('{').and_then(|s| s.strip_suffix('}'));
            // `{name*}`: a tail, the rest of the path; the last segment only.
            let inner = match inner.map(|n| (n.strip_suffix('*'), n)) {
                Some((Some(_), _)) if i + 1 < count => {
                    problems.push(format!(
                        "segment `{seg}` of `{path}`: a tail parameter `{{name*}}` must be the path's last segment"
                    ));
                    continue;
                }
                Some((Some(name), _)) => Some(name),
                Some((None, name)) => Some(name),
                None => None,
            };
            match inner {
                Some(name) if !name.contains(['{', '}']) => {
                    if !is_ident(name) {
                        problems.push(format!(
                            "path parameter `{{{name}}}` is not an identifier (letters, digits, `_`)"
                        ));
                    } else if params.iter().any(|p| p == name) {
                        problems.push(format!("duplicate path parameter `{{{name}}}` in `{path}`"));
                    } else {
                        params.push(name.to_string());
                    }
                }
                _ => problems.push(format!(
                    "segment `{seg}` of `{path}` is malformed: a parameter must be a whole segment `{{name}}`"
                )),
            }
        } else if let Some(p) = static_segment_problem(seg) {
            problems.push(format!("path `{path}`: {p}"));
        }
    }
    if problems.is_empty() {
        Ok(params)
    } else {
        Err(problems)
    }
}

/// The `{name}` placeholders of an upstream path template, or its problems.
pub(super) fn template_vars(path: &str) -> Result<Vec<String>, Vec<String>> {
    let mut problems = Vec::new();
    if !path.starts_with('/') {
        problems.push(format!("upstream path `{path}` must start with `/`"));
    }
    let mut vars: Vec<String> = Vec::new();
    let mut rest = path;
    while let Some(pos) = rest.find(['{', '}']) {
        if rest[pos..].starts_with('}') {
            problems.push(format!("upstream path `{path}` has a `}}` without `{{`"));
            break;
        }
        let after = &rest[pos + 1..];
        let Some(end) = after.find('}') else {
            problems.push(format!("upstream path `{path}` has a `{{` without `}}`"));
            break;
        };
        let name = &after[..end];
        if !is_ident(name) {
            problems.push(format!(
                "upstream path `{path}`: placeholder `{{{name}}}` is not an identifier"
            ));
        } else if !vars.iter().any(|v| v == name) {
            vars.push(name.to_string());
        }
        rest = &after[end + 1..];
    }
    if problems.is_empty() {
        Ok(vars)
    } else {
        Err(problems)
    }
}
