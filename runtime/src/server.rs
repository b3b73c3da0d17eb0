//! The HTTP server: accept loop, dispatch to the generated router, shutdown.
//!
//! `serve(listener, gateway, route, shutdown)` takes its dependencies (the
//! mini-redis shape): the binary binds, the tests bind `127.0.0.1:0`.
//! Every accepted socket gets `TCP_NODELAY` (without it a response written
//! in two pieces waits for a delayed ACK on keep-alive connections). Each
//! request's handler runs in its own task, so a client that hangs up cannot
//! cancel work that must finish (records, billing).

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use http::{header, HeaderValue};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use crate::body;
use crate::ctx::new_request_id;
use crate::errors::ApiError;
use crate::router::{Request, Response, RouteFn, RouteMatch};
use crate::spec::ErrorFormat;
use crate::Gateway;

/// How long shutdown waits for requests in flight.
const DRAIN: Duration = Duration::from_secs(30);

/// The error format for paths no row matched: by area prefix.
fn format_for_path(path: &str) -> ErrorFormat {
    if path.starts_with("/api/v1/voice") || !path.starts_with("/api/v1") {
        ErrorFormat::Detail
    } else {
        ErrorFormat::Envelope
    }
}

/// Routes one request.
pub async fn dispatch(gw: Gateway, route: RouteFn, req: Request) -> Response {
    let path = req.uri().path().to_owned();
    let path = path.as_str();
    if path.starts_with(crate::objects::serve::PATH_PREFIX) {
        // The local object store's presigned URLs (S3 serves its own).
        return match gw.objects.as_local() {
            Some(local) => {
                crate::objects::serve_presigned(local, req.method(), req.uri(), req.headers()).await
            }
            None => ApiError::NotFound("no such object".into())
                .into_response(ErrorFormat::Detail, &new_request_id()),
        };
    }
    if path == "/healthz" {
        let mut r = http::Response::new(body::full(r#"{"status":"ok"}"#));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        return r;
    }
    match route(req.method(), path) {
        RouteMatch::Found {
            handler, params, ..
        } => {
            // Detached: the handler finishes even if the client goes away.
            match tokio::spawn(handler(gw, req, params)).await {
                Ok(resp) => resp,
                Err(e) => {
                    tracing::error!(error = %e, "handler panicked");
                    ApiError::Internal("handler panicked".into())
                        .into_response(format_for_path(path), &new_request_id())
                }
            }
        }
        RouteMatch::MethodNotAllowed { allowed } => ApiError::MethodNotAllowed(allowed)
            .into_response(format_for_path(path), &new_request_id()),
        RouteMatch::NotFound => {
            let format = format_for_path(path);
            ApiError::NotFound(format!("no route for {} {}", req.method(), path))
                .into_response(format, &new_request_id())
        }
    }
}

/// Serves until `shutdown` resolves, then drains requests in flight.
pub async fn serve(
    listener: TcpListener,
    gw: Gateway,
    route: RouteFn,
    shutdown: impl Future<Output = ()>,
) {
    let graceful = GracefulShutdown::new();
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    tokio::pin!(shutdown);
    loop {
        let (stream, _peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let gw = gw.clone();
        let service = service_fn(move |req: Request| {
            let gw = gw.clone();
            async move { Ok::<_, Infallible>(dispatch(gw, route, req).await) }
        });
        let conn = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service)
            .into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    tracing::info!("shutting down: draining requests in flight");
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(DRAIN) => tracing::warn!("drain timed out"),
    }
}
