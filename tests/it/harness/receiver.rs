//! A callback receiver: a local HTTP server recording what it is sent.

use std::sync::{Arc, Mutex};

/// What a receiver saw: (signature header, body) per request.
pub type Seen = Arc<Mutex<Vec<(Option<String>, Vec<u8>)>>>;

/// A callback receiver: answers 500 to the first `fail_first` requests, then 200.
pub struct Receiver {
    pub url: String,
    pub seen: Seen,
    /// Each request's `X-Gateway-Timestamp`, in the order of `seen`.
    pub times: Arc<Mutex<Vec<Option<String>>>>,
}

pub async fn receiver(fail_first: usize) -> Receiver {
    use http_body_util::BodyExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let seen: Seen = Arc::default();
    let seen2 = seen.clone();
    let times: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let times2 = times.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let seen = seen2.clone();
            let times = times2.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let seen = seen.clone();
                        let times = times.clone();
                        async move {
                            let time = req
                                .headers()
                                .get("x-gateway-timestamp")
                                .map(|v| v.to_str().unwrap().to_owned());
                            let sig = req
                                .headers()
                                .get("x-provider-signature")
                                .map(|v| v.to_str().unwrap().to_owned());
                            let body = req.into_body().collect().await.unwrap().to_bytes().to_vec();
                            let n = {
                                let mut s = seen.lock().unwrap();
                                times.lock().unwrap().push(time);
                                s.push((sig, body));
                                s.len()
                            };
                            let status = if n <= fail_first { 500 } else { 200 };
                            Ok::<_, std::convert::Infallible>(
                                hyper::Response::builder()
                                    .status(status)
                                    .body(http_body_util::Full::new(bytes::Bytes::new()))
                                    .unwrap(),
                            )
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Receiver { url, seen, times }
}
