//! The models: who serves a model, at what price, in which dialect, and what
//! a model call may carry.
//!
//! Stands on `gateway-base`, `gateway-store` and `gateway-adapters`; knows
//! no route and no request context.
//!
//! * [`providers`] — the general gateway's model providers, their models and
//!   native adapters.
//! * [`routing`] — deployments, fallbacks and the attempt loop.
//! * [`cache`] — the response cache.
//! * [`bounds`] — the most a model request can cost (its hold), from its body.
//! * [`gemini_api`] — Gemini's API as an input dialect.
//! * [`messages_api`] — Anthropic's Messages API as an input dialect.
//! * [`responses_api`] — OpenAI's Responses API as an input dialect.
//! * [`cost`] — what an answer says it cost (`usage.cost`, `X-Gateway-Cost`).
//! * [`usage_tail`] — a stream's last event, held back until it is settled.

pub mod bounds;
pub mod cache;
pub mod cost;
pub mod gemini_api;
pub mod mcp;
pub mod messages_api;
pub mod providers;
pub mod realtime;
pub mod responses_api;
pub mod restream;
pub mod routing;
pub mod usage_tail;
