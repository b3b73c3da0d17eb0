//! Integration tests of the provider simulator: real servers on 127.0.0.1:0
//! driven over HTTP with reqwest.

mod api;
mod openai;
mod support;
