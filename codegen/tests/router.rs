//! The generated matcher, run: the real table and a small fixture, against
//! the stand-in runtime (`codegen-test-runtime`, under the name `runtime`).

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use runtime::__private::{Gateway, HttpMethod, RouteMatch};

/// The gateway's real table.
mod real {
    codegen::routes!("../endpoints.toml");
}

/// Shapes that overlap: a static segment against a parameter, at several depths.
mod fixture {
    codegen::routes!(
        inline = r#"
[areas.gateway]
prefix = "/api/v1"
auth = "bearer"
errors = "envelope"

[bases.main]
auth = "bearer"

[capabilities]
things = "off"

[[endpoint]]
id = "things.item"
area = "gateway"
method = "GET"
path = "/things/{a}/{b}"
mode = "proxy"
capability = "things"
billing = "free"
upstream = { base = "main", method = "GET", path = "/t/{a}/{b}" }

[[endpoint]]
id = "things.special"
area = "gateway"
method = "GET"
path = "/things/special/{b}"
mode = "proxy"
capability = "things"
billing = "free"
upstream = { base = "main", method = "GET", path = "/s/{b}" }

[[endpoint]]
id = "things.special_edit"
area = "gateway"
method = "PUT"
path = "/things/{a}/edit"
mode = "proxy"
capability = "things"
billing = "free"
upstream = { base = "main", method = "PUT", path = "/t/{a}/edit" }

[[endpoint]]
id = "things.delete"
area = "gateway"
method = "DELETE"
path = "/things/{a}/{b}"
mode = "proxy"
capability = "things"
billing = "free"
upstream = { base = "main", method = "DELETE", path = "/t/{a}/{b}" }

[[endpoint]]
id = "list"
area = "gateway"
method = "GET"
path = "/things/"
mode = "proxy"
capability = "things"
billing = "free"
upstream = { base = "main", method = "GET", path = "/t" }
"#
    );
}

/// A tail parameter (`{name*}`): the rest of the path, `/` included.
mod tail {
    codegen::routes!(
        inline = r#"
[areas.gateway]
prefix = "/api/v1"
auth = "bearer"
errors = "envelope"

[bases.main]
auth = "bearer"

[capabilities]
files = "off"

[[endpoint]]
id = "files.any"
area = "gateway"
method = "POST"
path = "/files/{bucket}/{name*}"
mode = "proxy"
capability = "files"
billing = "free"
upstream = { base = "main", method = "POST", path = "/f/{bucket}/{name}" }

[[endpoint]]
id = "files.special"
area = "gateway"
method = "GET"
path = "/files/{bucket}/special"
mode = "proxy"
capability = "files"
billing = "free"
upstream = { base = "main", method = "GET", path = "/s/{bucket}" }

[[endpoint]]
id = "files.one"
area = "gateway"
method = "GET"
path = "/files/{bucket}/{name}"
mode = "proxy"
capability = "files"
billing = "free"
upstream = { base = "main", method = "GET", path = "/f/{bucket}/{name}" }
"#
    );
}

type RouteFn = fn(&HttpMethod, &str) -> RouteMatch;

/// `(row id, [(param, raw value)])`, or `Err("405 <allowed>" | "404")`.
fn lookup(
    route: RouteFn,
    method: HttpMethod,
    path: &str,
) -> Result<(String, Vec<(String, String)>), String> {
    match route(&method, path) {
        RouteMatch::Found { spec, params, .. } => Ok((
            spec.id.to_string(),
            params
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
        )),
        RouteMatch::MethodNotAllowed { allowed } => Err(format!("405 {allowed}")),
        RouteMatch::NotFound => Err("404".to_string()),
    }
}

fn id(route: RouteFn, method: HttpMethod, path: &str) -> String {
    match lookup(route, method, path) {
        Ok((id, _)) => id,
        Err(e) => e,
    }
}

/// Every row is reachable: its own path (params filled in) finds that row,
/// with the parameters captured in order.
#[test]
fn every_real_row_is_reachable() {
    assert_eq!(real::ROUTES.len(), real::ROUTE_COUNT);
    for spec in real::ROUTES {
        let mut path = spec.path.to_string();
        let mut expected = Vec::new();
        for (i, name) in spec.params.iter().enumerate() {
            let tail = format!("{{{name}*}}");
            let value = match path.contains(&tail) {
                true => format!("v{i}-x/y:z"),
                false => format!("v{i}-x"),
            };
            path = path.replace(&tail, &value);
            path = path.replace(&format!("{{{name}}}"), &value);
            expected.push((name.to_string(), value));
        }
        let found = lookup(real::route, spec.method.to_http(), &path);
        assert_eq!(
            found,
            Ok((spec.id.to_string(), expected)),
            "{} {}",
            spec.method.as_str(),
            path
        );
    }
}

/// The generated `ROUTES` is what `parse_table` reads at run time (sqlx style).
#[test]
fn real_routes_match_the_table_parsed_at_run_time() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../endpoints.toml")).unwrap();
    let table = codegen_impl::parse_table(&text).expect("the table is valid");
    let generated: Vec<String> = real::ROUTES.iter().map(|s| s.listing_line()).collect();
    assert_eq!(generated, table.listing());
    for (spec, row) in real::ROUTES.iter().zip(&table.rows) {
        assert_eq!(spec.id, row.id);
        assert_eq!(
            spec.params,
            row.params
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .as_slice()
        );
        assert_eq!(spec.set, row.set.as_deref());
        assert_eq!(spec.body.len(), row.body.len());
        assert_eq!(
            spec.upstream.map(|u| u.path),
            row.upstream.as_ref().map(|u| u.path.as_str())
        );
    }
}

#[test]
fn real_table_facts_match_the_table_parsed_at_run_time() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../endpoints.toml")).unwrap();
    let table = codegen_impl::parse_table(&text).expect("the table is valid");
    let t = &real::TABLE;
    assert_eq!(t.routes.len(), real::ROUTE_COUNT);
    assert!(t
        .routes
        .iter()
        .zip(real::ROUTES)
        .all(|(a, b)| std::ptr::eq(*a, *b)));

    assert_eq!(t.capabilities.len(), table.capabilities.len());
    for (c, def) in t.capabilities.iter().zip(&table.capabilities) {
        assert_eq!(c.name, def.name);
        assert_eq!(
            c.quota.map(|q| (q.count, q.per_secs)),
            def.quota.map(|q| (q.count, q.per_secs))
        );
    }
    assert_eq!(t.capability("webhook").unwrap().quota, None);
    assert_eq!(t.capability("tts").unwrap().quota.unwrap().count, 60);
    // Every row's capability is one of them.
    assert!(t
        .routes
        .iter()
        .all(|r| t.capability(r.capability).is_some()));

    let kinds = table.job_kinds();
    assert_eq!(t.job_kinds.len(), kinds.len());
    for (k, def) in t.job_kinds.iter().zip(&kinds) {
        assert_eq!(k.kind, def.kind);
        assert_eq!(k.submit.id, def.submit.id);
        assert_eq!(k.get.map(|g| g.id), def.get.map(|g| g.id.as_str()));
        assert_eq!(k.mirror, def.mirror());
    }
    let stt = t.job_kind("stt").unwrap();
    assert!(std::ptr::eq(stt.submit, &real::STT_SUBMIT));
    assert!(std::ptr::eq(stt.get.unwrap(), &real::STT_GET));

    assert_eq!(t.bases.len(), table.bases.len());
    for (b, def) in t.bases.iter().zip(&table.bases) {
        assert_eq!(b.base.as_str(), def.name.as_str());
        assert_eq!(b.auth.as_str(), def.auth.as_str());
    }
}

#[test]
fn real_table_spot_checks() {
    let r = real::route;
    use HttpMethod as M;
    // Static segments win over parameters.
    assert_eq!(
        id(r, M::GET, "/api/v1/voice/agents/capabilities"),
        "agents.capabilities"
    );
    assert_eq!(
        id(r, M::GET, "/api/v1/voice/agents/system-tools"),
        "agents.system_tools"
    );
    assert_eq!(id(r, M::GET, "/api/v1/voice/agents/abc"), "agents.get");
    assert_eq!(id(r, M::GET, "/api/v1/models/trending"), "models.trending");
    // One trailing slash is ignored either way.
    assert_eq!(id(r, M::GET, "/api/v1/models"), "models.list");
    assert_eq!(id(r, M::GET, "/api/v1/models/"), "models.list");
    assert_eq!(
        id(r, M::POST, "/api/v1/voice/tts/synthesize/"),
        "tts.synthesize"
    );
    // Methods.
    assert_eq!(id(r, M::DELETE, "/api/v1/voice/tts/synthesize"), "405 POST");
    assert_eq!(
        id(r, M::PATCH, "/api/v1/voice/agents/abc"),
        "405 GET, PUT, DELETE"
    );
    assert_eq!(id(r, M::HEAD, "/api/v1/voice/stt"), "405 GET, POST");
    // Not found.
    for path in [
        "",
        "/",
        "api/v1/models",
        "/api/v1/voice/agents/abc/def",
        "/api/v1/models//",
        "//api/v1/models",
        "/api/v1/voice/tts//voices",
        "/api/v1/voice/tts/voices//",
        "/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p",
        "/API/v1/models",
    ] {
        assert_eq!(id(r, M::GET, path), "404", "{path:?}");
    }
    // Parameters stay as they arrived (percent-encoded).
    assert_eq!(
        lookup(r, M::GET, "/api/v1/models/open%2Fai/gpt-4o"),
        Ok((
            "models.get".to_string(),
            vec![
                ("provider_id".to_string(), "open%2Fai".to_string()),
                ("model_id".to_string(), "gpt-4o".to_string())
            ]
        ))
    );
}

#[test]
fn fixture_overlaps_resolve_to_the_most_specific_row() {
    let r = fixture::route;
    use HttpMethod as M;
    let found = |m, p| lookup(r, m, p).unwrap();
    assert_eq!(found(M::GET, "/api/v1/things/x/y").0, "things.item");
    assert_eq!(
        found(M::GET, "/api/v1/things/special/y"),
        (
            "things.special".to_string(),
            vec![("b".to_string(), "y".to_string())]
        )
    );
    // `special/edit`: static `special` (leftmost) wins over `{a}/edit`.
    assert_eq!(id(r, M::PUT, "/api/v1/things/special/edit"), "405 GET");
    assert_eq!(
        id(r, M::PUT, "/api/v1/things/x/edit"),
        "things.special_edit"
    );
    // The path picks the shape first, then the method: no fallback to a less
    // specific shape that has the method (as in matchit / axum).
    assert_eq!(id(r, M::GET, "/api/v1/things/x/edit"), "405 PUT");
    assert_eq!(id(r, M::DELETE, "/api/v1/things/x/y"), "things.delete");
    assert_eq!(id(r, M::POST, "/api/v1/things/x/y"), "405 GET, DELETE");
    assert_eq!(id(r, M::GET, "/api/v1/things"), "list");
    assert_eq!(id(r, M::GET, "/api/v1/things/"), "list");
    assert_eq!(fixture::ROUTE_COUNT, 5);
    assert_eq!(fixture::THINGS_SPECIAL.params, &["b"]);
}

/// A handler is one call into the runtime with its own row.
#[test]
fn handlers_call_the_runtime_with_their_row() {
    let RouteMatch::Found {
        handler, params, ..
    } = real::route(&HttpMethod::GET, "/api/v1/voice/tts/voices/abc")
    else {
        panic!("route not found");
    };
    let mut fut = pin!(handler(Gateway::default(), (), params));
    let mut cx = Context::from_waker(Waker::noop());
    match fut.as_mut().poll(&mut cx) {
        Poll::Ready(answer) => assert_eq!(answer, "tts.voices.get voice_uuid=abc"),
        Poll::Pending => panic!("the stub pipeline is ready at once"),
    }
}

/// The generator's limit is the runtime's (the stand-in compiles the real `runtime/src/spec.rs`).
#[test]
fn max_params_matches_the_runtime() {
    assert_eq!(codegen_impl::MAX_PARAMS, runtime::__private::MAX_PARAMS);
}

/// A tail takes one segment or more, joined by `/` as they came; a static
/// segment or a one-segment parameter at its place wins (more specific).
#[test]
fn a_tail_parameter_takes_the_rest_of_the_path() {
    let r = tail::route;
    use HttpMethod as M;
    let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(
        lookup(r, M::POST, "/api/v1/files/b1/gem/gemini-x:generateContent"),
        Ok((
            "files.any".to_string(),
            vec![
                pair("bucket", "b1"),
                pair("name", "gem/gemini-x:generateContent")
            ]
        ))
    );
    assert_eq!(
        lookup(r, M::POST, "/api/v1/files/b1/one%2Fx/y/"),
        Ok((
            "files.any".to_string(),
            vec![pair("bucket", "b1"), pair("name", "one%2Fx/y")]
        ))
    );
    // One segment: the `{name}` shape is more specific, and has no POST.
    assert_eq!(id(r, M::GET, "/api/v1/files/b1/x"), "files.one");
    assert_eq!(id(r, M::POST, "/api/v1/files/b1/x"), "405 GET");
    assert_eq!(id(r, M::GET, "/api/v1/files/b1/special"), "files.special");
    assert_eq!(id(r, M::GET, "/api/v1/files/b1/x/y"), "405 POST");
    // A tail is never empty, nor holds an empty segment.
    assert_eq!(id(r, M::POST, "/api/v1/files/b1"), "404");
    assert_eq!(id(r, M::POST, "/api/v1/files/b1/x//y"), "404");
    // At most 16 segments.
    let long = format!("/api/v1/files/b1/{}", ["s"; 16].join("/"));
    assert_eq!(id(r, M::POST, &long), "files.any");
    assert_eq!(id(r, M::POST, &format!("{long}/s")), "404");
    assert_eq!(tail::FILES_ANY.params, &["bucket", "name"]);
}
