//! Integration tests of the provider simulator: real servers on 127.0.0.1:0
//! driven over HTTP with reqwest (and WebSockets with tokio-tungstenite).

mod anthropic;
mod api;
mod deepgram_live;
mod gemini;
mod openai;
mod realtime;
mod responses;
mod support;
mod voice_speech;
mod voice_stt;
mod ws;
