//! Integration tests of the provider simulator: real servers on 127.0.0.1:0
//! driven over HTTP with reqwest.

mod anthropic;
mod api;
mod gemini;
mod openai;
mod responses;
mod support;
mod voice_speech;
mod voice_stt;
