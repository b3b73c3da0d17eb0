//! Every configured provider and route, and model lookup by name
//! ([`Providers`]; reading the file is [`super::file`]'s).

use super::model::{Model, ModelType};
use super::provider::Provider;
use super::routes::{Deployment, Route};
use gateway_base::errors::ApiError;

/// Every configured provider (empty without a providers file).
#[derive(Debug, Clone, Default)]
pub struct Providers {
    pub providers: Vec<Provider>,
    /// The file's `[[route]]`s ([`super::routes`]).
    pub routes: Vec<Route>,
    /// The file's `[[voice]]` aliases ([`super::voices`]).
    pub voices: Vec<super::voices::Voice>,
    /// A digest of every price of the file ([`Providers::prices`]): the
    /// version usage records name (empty: no providers file).
    pub version: String,
}

impl Providers {
    /// Every model's prices, by `provider/model`, with its provider's
    /// markup: what [`Providers::version`] digests.
    pub fn prices(&self) -> serde_json::Value {
        let mut out = serde_json::Map::new();
        for (p, m) in self.models() {
            let d = |v: Option<rust_decimal::Decimal>| v.map(|d| d.normalize().to_string());
            let prices = serde_json::json!({
                "markup_pct": p.markup_pct.normalize().to_string(),
                "input_per_mtok": d(m.input_per_mtok), "output_per_mtok": d(m.output_per_mtok),
                "cache_read_per_mtok": d(m.cache_read_per_mtok), "cache_write_per_mtok": d(m.cache_write_per_mtok),
                "input_audio_per_mtok": d(m.input_audio_per_mtok), "output_audio_per_mtok": d(m.output_audio_per_mtok),
                "per_image": d(m.per_image), "per_second": d(m.per_second), "per_minute": d(m.per_minute),
                "per_1k_chars": d(m.per_1k_chars),
                "cache_hit_price_pct": m.cache_hit_price_pct.normalize().to_string(),
                "batch_price_pct": m.batch_price_pct.normalize().to_string(),
            });
            out.insert(format!("{}/{}", p.id, m.id), prices);
        }
        serde_json::Value::Object(out)
    }

    /// The version of these prices: the first 16 hex digits of the SHA-256
    /// of [`Providers::prices`] (the same prices, the same version).
    pub fn digest(&self) -> String {
        use sha2::Digest;
        let h = sha2::Sha256::digest(self.prices().to_string().as_bytes());
        hex::encode(h)[..16].to_owned()
    }

    /// The version a usage record names (`None` without a providers file).
    pub fn price_version(&self) -> Option<String> {
        (!self.version.is_empty()).then(|| self.version.clone())
    }

    /// Every (provider, model), in file order.
    pub fn models(&self) -> impl Iterator<Item = (&Provider, &Model)> {
        self.providers
            .iter()
            .flat_map(|p| p.models.iter().map(move |m| (p, m)))
    }

    /// One model by provider and model id.
    pub fn get(&self, provider: &str, model: &str) -> Option<(&Provider, &Model)> {
        let p = self.providers.iter().find(|p| p.id == provider)?;
        Some((p, p.models.iter().find(|m| m.id == model)?))
    }

    /// The route named `name`.
    pub fn route(&self, name: &str) -> Option<&Route> {
        self.routes.iter().find(|r| r.name == name.trim())
    }

    /// The provider and model of a deployment.
    pub fn deployment(&self, d: Deployment) -> (&Provider, &Model) {
        let p = &self.providers[d.provider];
        (p, &p.models[d.model])
    }

    /// The model a request names (`provider/model` or an alias; absent:
    /// the first model of type `want`). Unknown → 404; another type → 400.
    pub fn resolve(
        &self,
        name: Option<&str>,
        want: ModelType,
    ) -> Result<(&Provider, &Model), ApiError> {
        let found = match name.map(str::trim) {
            None | Some("") => self.models().find(|(_, m)| m.kind == want).ok_or_else(|| {
                ApiError::NotFound(format!("no {} model is configured", want.as_str()))
            })?,
            Some(name) => match name.split_once('/') {
                Some((p, m)) => {
                    if !self.providers.iter().any(|x| x.id == p) {
                        return Err(ApiError::NotFound(format!("provider {p:?} not found")));
                    }
                    self.get(p, m)
                        .ok_or_else(|| ApiError::NotFound(format!("model {name:?} not found")))?
                }
                None => self
                    .models()
                    .find(|(_, m)| m.aliases.iter().any(|a| a == name))
                    .or_else(|| {
                        let r = self.route(name)?;
                        Some(self.deployment(r.targets[0].deployment))
                    })
                    .ok_or_else(|| {
                        ApiError::NotFound(format!(
                            "model {name:?} not found (models are named provider/model)"
                        ))
                    })?,
            },
        };
        if found.1.kind != want {
            return Err(ApiError::BadRequest(format!(
                "model {}/{} is a {} model, not {}",
                found.0.id,
                found.1.id,
                found.1.kind.as_str(),
                want.as_str()
            )));
        }
        Ok(found)
    }
}
