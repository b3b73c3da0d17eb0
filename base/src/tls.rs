//! TLS of the gateway's own connections to PostgreSQL and Redis (rustls
//! with ring, the provider the upstream client uses too).
//!
//! * [`read_roots`] — a PEM file of CA certificates (`sslrootcert` of
//!   `GATEWAY_DATABASE_URL`, `GATEWAY_REDIS_CA_FILE`): an unreadable file,
//!   one that is not PEM, or one holding no certificate is refused whole.
//! * [`client_config`] — a rustls client configuration for one [`Verify`]
//!   level, named as libpq names them: nothing verified (`require`), the
//!   chain but not the host name (`verify-ca`: [`ChainOnly`]), or both
//!   (`verify-full`, rustls's own verifier).
//! * [`refused_certificate`] — whether a connection failed because the
//!   server's certificate was refused (a wrong CA, a wrong host name, an
//!   expired certificate): a configuration error to name, not an outage.
//! * [`install_provider`] — ring as the process's rustls provider, for the
//!   libraries that build their configuration from it (the Redis client).
//!
//! Chosen over hand-written parts: rustls's `WebPkiServerVerifier` does
//! every check; [`ChainOnly`] only forgives its name mismatch (the chain is
//! checked before the name, so a name error means the chain was good).

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};

/// The crypto provider of every connection the gateway makes.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Makes ring the process's default rustls provider unless one is set:
/// the Redis client builds its configuration from the default.
pub fn install_provider() {
    if CryptoProvider::get_default().is_none() {
        // Lost a race with another thread installing one: that one serves.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// The CA certificates of the PEM file at `path`; the error says what is
/// wrong with the file (the caller names its variable).
pub fn read_roots(path: &Path) -> Result<RootCertStore, String> {
    let pem = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    roots_of(&pem).map_err(|e| format!("{}: {e}", path.display()))
}

/// The CA certificates of a PEM document.
pub fn roots_of(pem: &[u8]) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| format!("not a PEM certificate file ({e})"))?;
        roots
            .add(cert)
            .map_err(|e| format!("a certificate that does not parse ({e})"))?;
    }
    if roots.is_empty() {
        return Err("no certificate in it (expected PEM: -----BEGIN CERTIFICATE-----)".to_owned());
    }
    Ok(roots)
}

/// The public web's CAs (webpki-roots), for `sslrootcert=system`.
pub fn web_roots() -> RootCertStore {
    RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    }
}

/// What a client checks of the server's certificate.
#[derive(Clone, Debug)]
pub enum Verify {
    /// Nothing: the connection is encrypted, its peer not authenticated.
    Nothing,
    /// The chain up to one of these CAs, not the host name.
    Chain(Arc<RootCertStore>),
    /// The chain up to one of these CAs and the host name.
    Full(Arc<RootCertStore>),
}

/// A client configuration that checks what `verify` says.
pub fn client_config(verify: &Verify) -> Result<ClientConfig, String> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    Ok(match verify {
        Verify::Full(roots) => builder
            .with_root_certificates(roots.clone())
            .with_no_client_auth(),
        Verify::Chain(roots) => {
            let inner = WebPkiServerVerifier::builder_with_provider(roots.clone(), provider)
                .build()
                .map_err(|e| e.to_string())?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(ChainOnly(inner)))
                .with_no_client_auth()
        }
        Verify::Nothing => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth(),
    })
}

/// The reason a server's certificate was refused, if `e` (or one of its
/// causes) says so.
pub fn refused_certificate(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cause = Some(e);
    while let Some(e) = cause {
        if let Some(r) = e.downcast_ref::<rustls::Error>() {
            if matches!(r, rustls::Error::InvalidCertificate(_)) {
                return Some(r.to_string());
            }
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if let Some(r) = io.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
                if matches!(r, rustls::Error::InvalidCertificate(_)) {
                    return Some(r.to_string());
                }
            }
        }
        cause = e.source();
    }
    // Some clients keep their cause behind a type of their own (redis's
    // `Arc<dyn Error>`): rustls's text of the refusal is the last resort.
    let text = e.to_string();
    let at = text.find("invalid peer certificate")?;
    Some(text[at..].to_owned())
}

/// `verify-ca`: rustls's verifier, a host name mismatch forgiven.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            // The name is checked after the chain: the chain was good.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `require` without a CA: any certificate; the handshake's signatures are
/// still checked (the session is encrypted to whoever holds the key).
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_that_hold_no_certificate_are_refused() {
        assert!(roots_of(b"").unwrap_err().contains("no certificate"));
        assert!(roots_of(b"hello").unwrap_err().contains("no certificate"));
        let bad = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(roots_of(bad).is_err());
        let e = read_roots(Path::new("/nonexistent/ca.pem")).unwrap_err();
        assert!(e.contains("cannot read /nonexistent/ca.pem"), "{e}");
    }

    #[test]
    fn a_refusal_is_found_behind_io_errors_and_in_text() {
        let r = rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer);
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, r);
        assert_eq!(
            refused_certificate(&io).as_deref(),
            Some("invalid peer certificate: UnknownIssuer")
        );
        let refused = std::io::Error::other("connection refused");
        assert_eq!(refused_certificate(&refused), None);
    }
}
