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
}

impl Providers {
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
