//! The model call: one request to a model, from its body to its bill.

mod prepare;
mod resolve;

pub(crate) use prepare::{prepare_cached, prepare_model_call, Hit};
pub(crate) use resolve::pick_model;
