//! Helpers shared by the test modules.

use std::time::Duration;

use reqwest::multipart::Part;
use serde_json::Value;
use sim::{Sim, SimConfig};
use tokio::sync::mpsc;

/// Starts a simulator on an ephemeral loopback port.
pub async fn start(config: SimConfig) -> Sim {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    sim::start(listener, config).await
}

/// A client with a 5 s time-out.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// GET returning (status, JSON body).
pub async fn get(c: &reqwest::Client, url: String) -> (u16, Value) {
    let r = c.get(url).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

/// POST a JSON body, returning (status, JSON body).
pub async fn post(c: &reqwest::Client, url: String, body: Value) -> (u16, Value) {
    let r = c.post(url).json(&body).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

/// A multipart file part holding a WAV of `ms` milliseconds.
pub fn wav_part(ms: u64, name: &str) -> Part {
    Part::bytes(sim::audio::wav_tone(ms, 16000, 16))
        .file_name(name.to_owned())
        .mime_str("audio/wav")
        .unwrap()
}

/// A tiny webhook receiver: forwards (signature header, raw body) of each POST.
pub async fn receiver() -> (String, mpsc::UnboundedReceiver<(Option<String>, Vec<u8>)>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: http::HeaderMap, body: bytes::Bytes| {
            let tx = tx.clone();
            async move {
                let sig = headers
                    .get("x-provider-signature")
                    .map(|v| v.to_str().unwrap().to_owned());
                let _ = tx.send((sig, body.to_vec()));
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, rx)
}

/// Reads a streamed body: (how many chunks arrived, all the bytes).
pub async fn chunks(mut r: reqwest::Response) -> (usize, Vec<u8>) {
    let (mut n, mut all) = (0, Vec::new());
    while let Some(c) = r.chunk().await.unwrap() {
        n += 1;
        all.extend_from_slice(&c);
    }
    (n, all)
}

/// Serves `bytes` at the returned URL (any GET), as remote audio.
pub async fn serve_bytes(bytes: Vec<u8>) -> String {
    let app = axum::Router::new().route(
        "/audio.wav",
        axum::routing::get(move || {
            let b = bytes.clone();
            async move { b }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/audio.wav", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}
