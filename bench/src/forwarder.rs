//! The bare forwarder: the floor any HTTP proxy pays.
//!
//! A minimal hyper 1 reverse proxy with no authentication, no billing, no
//! parsing: every request is sent to the one upstream with the same method,
//! path, query, headers (less hop-by-hop ones) and streamed body, through one
//! pooled keep-alive client; the answer is streamed back as it comes.
//! `TCP_NODELAY` is set on every accepted and every upstream socket, and the
//! runtime is the same kind as the gateway's (multi-threaded tokio, one
//! worker per CPU it may use), so the two compare like for like.
//!
//! `POST /__bench/sink` is answered locally: the body is drained and counted
//! (`{"bytes": N}`), the floor of the upload scenario.
//!
//! It runs as the hidden `gateway-bench forwarder --upstream ADDR` subcommand,
//! in its own process, so that it can be pinned and measured exactly like
//! the gateway.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http::header::{self, HeaderName};
use http::{Request, Response, StatusCode, Uri};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};

/// Path answered by the forwarder itself.
pub const SINK_PATH: &str = "/__bench/sink";

/// Response body type: streamed upstream bodies or small local answers.
type Body = BoxBody<Bytes, hyper::Error>;
/// The pooled upstream client.
type Upstream = Client<HttpConnector, Incoming>;

/// Headers that belong to one connection (RFC 9110 §7.6.1) and are not forwarded.
const HOP_BY_HOP: [HeaderName; 7] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
];

/// Runs the forwarder until the process is killed: binds `addr`, prints
/// `listening on ADDR` on stdout, forwards everything to `upstream`.
pub fn run(upstream: SocketAddr, addr: SocketAddr) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(serve(upstream, addr))
}

async fn serve(upstream: SocketAddr, addr: SocketAddr) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("listening on {}", listener.local_addr()?);
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: Upstream = Client::builder(TokioExecutor::new()).build(connector);
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(_) => continue,
        };
        let _ = stream.set_nodelay(true);
        let client = client.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| forward(client.clone(), upstream, req));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

/// Forwards one request (or answers the sink).
async fn forward(
    client: Upstream,
    upstream: SocketAddr,
    mut req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    if req.uri().path() == SINK_PATH {
        return Ok(sink(req).await);
    }
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let uri: Uri = match format!("http://{upstream}{path}").parse() {
        Ok(u) => u,
        Err(_) => return Ok(local(StatusCode::BAD_REQUEST, "bad path")),
    };
    *req.uri_mut() = uri;
    strip_hop_by_hop(req.headers_mut());
    // The client sets Host from the URI.
    req.headers_mut().remove(header::HOST);
    match client.request(req).await {
        Ok(resp) => {
            let (mut parts, body) = resp.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            Ok(Response::from_parts(parts, body.boxed()))
        }
        Err(e) => Ok(local(
            StatusCode::BAD_GATEWAY,
            &format!("upstream error: {e}"),
        )),
    }
}

fn strip_hop_by_hop(headers: &mut http::HeaderMap) {
    for h in &HOP_BY_HOP {
        headers.remove(h);
    }
}

/// Drains the body and answers how many bytes it had.
async fn sink(req: Request<Incoming>) -> Response<Body> {
    let mut body = req.into_body();
    let mut n: u64 = 0;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(f) => n += f.data_ref().map_or(0, |d| d.len() as u64),
            Err(e) => return local(StatusCode::BAD_REQUEST, &format!("body error: {e}")),
        }
    }
    local(StatusCode::OK, &format!("{{\"bytes\":{n}}}"))
}

/// A small local answer.
fn local(status: StatusCode, text: &str) -> Response<Body> {
    let body = Full::new(Bytes::from(text.to_owned()))
        .map_err(|never| match never {})
        .boxed();
    let mut r = Response::new(body);
    *r.status_mut() = status;
    r
}
