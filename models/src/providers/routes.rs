//! Routes of the providers file: one model name callers send, served by
//! several deployments (models of the file) with a strategy and fallbacks.
//!
//! ```toml
//! [[route]]
//! model = "smart"                 # what callers send (listed by /models)
//! strategy = "weighted"           # weighted | least-latency | priority
//! targets = [ { model = "openai/gpt-4o", weight = 3 }, { model = "azure/gpt-4o", weight = 1 } ]
//! fallbacks = ["anthropic/claude-sonnet-4"]   # tried in order when every target failed
//! ```
//!
//! Checked once at start-up ([`build`]): every target and fallback is a
//! model of the file (`provider/model` or an alias), all of one type; the
//! route's name is no model's name or alias and no other route's. A mistake
//! names the file, the route's line and the key.

use serde::Deserialize;
use toml::Spanned;

use super::model::ModelType;
use super::provider::Provider;

/// How a route orders its targets for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// A random order drawn by weight (the first by weight, then the rest).
    Weighted,
    /// The lowest moving average of time to first byte first, with a
    /// little exploration ([`crate::routing`]).
    LeastLatency,
    /// The file's order.
    Priority,
}

impl Strategy {
    pub fn parse(s: &str) -> Option<Strategy> {
        match s {
            "weighted" => Some(Strategy::Weighted),
            "least-latency" => Some(Strategy::LeastLatency),
            "priority" => Some(Strategy::Priority),
            _ => None,
        }
    }
}

/// One deployment: a model of the file, by index (provider, model).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deployment {
    pub provider: usize,
    pub model: usize,
}

/// A target of a route with its weight (1 unless said).
#[derive(Debug, Clone, Copy)]
pub struct Target {
    pub deployment: Deployment,
    pub weight: u32,
}

/// One `[[route]]`.
#[derive(Debug, Clone)]
pub struct Route {
    /// What callers send.
    pub name: String,
    pub strategy: Strategy,
    pub targets: Vec<Target>,
    /// Tried in order after every target failed.
    pub fallbacks: Vec<Deployment>,
    /// The type of every target and fallback.
    pub kind: ModelType,
    /// Answers are cached this long unless a request says otherwise
    /// (`cache_ttl_secs`, as a model's; keyed by the route's name).
    pub cache_ttl_secs: Option<u64>,
    /// Limits per user of the route (`rpm`, `tpm`), beside its deployments'.
    pub limits: super::model::UserLimits,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RouteDoc {
    model: Spanned<String>,
    strategy: Option<String>,
    targets: Vec<TargetDoc>,
    #[serde(default)]
    fallbacks: Vec<String>,
    cache_ttl_secs: Option<u64>,
    rpm: Option<u64>,
    tpm: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetDoc {
    model: String,
    weight: Option<u32>,
}

/// The deployment a route names (`provider/model` or an alias).
fn find(providers: &[Provider], name: &str) -> Option<Deployment> {
    providers.iter().enumerate().find_map(|(pi, p)| {
        p.models.iter().enumerate().find_map(|(mi, m)| {
            let full = name
                .split_once('/')
                .is_some_and(|(a, b)| a == p.id && b == m.id);
            (full || m.aliases.iter().any(|a| a == name)).then_some(Deployment {
                provider: pi,
                model: mi,
            })
        })
    })
}

/// Checks the routes of a file named `file` (whose text is `text`)
/// against its `providers`; a mistake's message names the file, the
/// route's line and the key.
pub(super) fn build(
    docs: Vec<RouteDoc>,
    providers: &[Provider],
    file: &str,
    text: &str,
) -> Result<Vec<Route>, String> {
    let mut routes: Vec<Route> = Vec::new();
    for doc in docs {
        let line = text[..doc.model.span().start.min(text.len())]
            .matches('\n')
            .count()
            + 1;
        let at = format!("{file}: line {line}: route {:?}", doc.model.get_ref());
        let route = route(doc, providers, &routes, &at)?;
        routes.push(route);
    }
    Ok(routes)
}

/// One `[[route]]`, checked against the file's `providers` and the routes
/// before it (`earlier`); `at` places it in the file for the messages.
fn route(
    doc: RouteDoc,
    providers: &[Provider],
    earlier: &[Route],
    at: &str,
) -> Result<Route, String> {
    let err = |key: &str, what: String| format!("{at}: {key}: {what}");
    let name = doc.model.into_inner();
    if name.trim().is_empty() || name.contains('/') {
        return Err(err("model", "must be non-empty, without '/'".into()));
    }
    if find(providers, &name).is_some() || earlier.iter().any(|r| r.name == name) {
        return Err(err(
            "model",
            "is already the name of a model, an alias or another route".into(),
        ));
    }
    let strategy = match doc.strategy.as_deref() {
        None => Strategy::Weighted,
        Some(s) => Strategy::parse(s).ok_or_else(|| {
            err(
                "strategy",
                format!("{s:?} is not one of weighted, least-latency, priority"),
            )
        })?,
    };
    if doc.targets.is_empty() {
        return Err(err("targets", "must name at least one model".into()));
    }
    let mut members = Members {
        providers,
        at,
        kind: None,
    };
    let mut targets = Vec::with_capacity(doc.targets.len());
    for t in &doc.targets {
        let deployment = members.resolve("targets", &t.model)?;
        let weight = t.weight.unwrap_or(1);
        if weight == 0 {
            return Err(err(
                "targets",
                format!("{:?}: weight must be at least 1", t.model),
            ));
        }
        targets.push(Target { deployment, weight });
    }
    let fallbacks = doc
        .fallbacks
        .iter()
        .map(|f| members.resolve("fallbacks", f))
        .collect::<Result<Vec<_>, _>>()?;
    if doc
        .cache_ttl_secs
        .is_some_and(|t| t == 0 || t > crate::cache::MAX_TTL.as_secs())
    {
        return Err(err(
            "cache_ttl_secs",
            format!("must be from 1 to {}", crate::cache::MAX_TTL.as_secs()),
        ));
    }
    let limits =
        super::model::UserLimits::read(doc.rpm, doc.tpm).map_err(|e| format!("{at}: {e}"))?;
    Ok(Route {
        limits,
        name,
        strategy,
        targets,
        fallbacks,
        kind: members.kind.unwrap_or(ModelType::Chat),
        cache_ttl_secs: doc.cache_ttl_secs,
    })
}

/// The models a route names, in the order it names them: each must be a
/// model of the file, and all of the first one's type (a route answers one
/// kind of request).
struct Members<'a> {
    providers: &'a [Provider],
    at: &'a str,
    /// The type of the first member resolved.
    kind: Option<ModelType>,
}

impl Members<'_> {
    /// The deployment named `model` under the route's `key`.
    fn resolve(&mut self, key: &str, model: &str) -> Result<Deployment, String> {
        let at = self.at;
        let d = find(self.providers, model).ok_or_else(|| {
            format!(
                "{at}: {key}: {model:?} is not a model of this file (provider/model or an alias)"
            )
        })?;
        let t = self.providers[d.provider].models[d.model].kind;
        match self.kind {
            Some(k) if k != t => Err(format!(
                "{at}: {key}: {model:?} is a {} model; the route's models are {}",
                t.as_str(),
                ModelType::as_str(k)
            )),
            _ => {
                self.kind = Some(t);
                Ok(d)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rust_decimal::Decimal;

    use super::super::file::parse;

    const FILE: &str = r#"
[[provider]]
id = "a"
kind = "openai"
base_url = "http://127.0.0.1:1/v1"
api_key_env = "GW_TEST_UNSET_KEY_VAR"
[[provider.model]]
id = "gpt"
type = "chat"
[[provider.model]]
id = "emb"
type = "embedding"
[[provider]]
id = "b"
kind = "openai"
base_url = "http://127.0.0.1:2/v1"
api_key_env = "GW_TEST_UNSET_KEY_VAR"
[[provider.model]]
id = "gpt"
type = "chat"
aliases = ["bgpt"]

[[route]]
model = "smart"
strategy = "priority"
targets = [ { model = "a/gpt", weight = 3 }, { model = "bgpt" } ]
fallbacks = ["b/gpt"]
"#;

    fn err(text: &str) -> String {
        parse(text, "p.toml", Decimal::ZERO).unwrap_err().0
    }

    #[test]
    fn a_routes_cache_ttl_is_read_and_checked() {
        let p = parse(
            &FILE.replace(
                "fallbacks = [\"b/gpt\"]",
                "fallbacks = [\"b/gpt\"]\ncache_ttl_secs = 60",
            ),
            "p.toml",
            Decimal::ZERO,
        )
        .unwrap();
        assert_eq!(p.route("smart").unwrap().cache_ttl_secs, Some(60));
        assert_eq!(
            parse(FILE, "p.toml", Decimal::ZERO)
                .unwrap()
                .route("smart")
                .unwrap()
                .cache_ttl_secs,
            None
        );
        for bad in ["0", "86401"] {
            let e = err(&FILE.replace(
                "fallbacks = [\"b/gpt\"]",
                &format!("fallbacks = [\"b/gpt\"]\ncache_ttl_secs = {bad}"),
            ));
            assert!(e.contains("p.toml") && e.contains("cache_ttl_secs"), "{e}");
        }
    }

    #[test]
    fn a_route_resolves_its_targets() {
        let p = parse(FILE, "p.toml", Decimal::ZERO).unwrap();
        let r = p.route("smart").unwrap();
        assert_eq!(r.targets.len(), 2);
        assert_eq!(r.targets[0].weight, 3);
        assert_eq!(r.targets[1].deployment.provider, 1);
        assert_eq!(r.fallbacks.len(), 1);
    }

    #[test]
    fn mistakes_name_the_file_the_line_and_the_key() {
        let e = err(&FILE.replace("{ model = \"bgpt\" }", "{ model = \"b/none\" }"));
        assert!(
            e.contains("p.toml") && e.contains("line 24") && e.contains("targets"),
            "{e}"
        );
        let e = err(&FILE.replace("[\"b/gpt\"]", "[\"a/emb\"]"));
        assert!(
            e.contains("fallbacks") && e.contains("embedding model"),
            "{e}"
        );
        let e = err(&FILE.replace("\"priority\"", "\"fastest\""));
        assert!(e.contains("strategy") && e.contains("fastest"), "{e}");
        let e = err(&FILE.replace("model = \"smart\"", "model = \"bgpt\""));
        assert!(e.contains("already"), "{e}");
        let e = err(&FILE.replace("weight = 3", "weight = 0"));
        assert!(e.contains("weight"), "{e}");
        let e = err(&FILE.replace("fallbacks =", "fallback ="));
        assert!(e.contains("fallback"), "{e}");
    }
}
