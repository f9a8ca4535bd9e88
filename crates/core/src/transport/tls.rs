//! TLS for `https:` origins, with rustls: roots (Mozilla's, `NODE_EXTRA_CA_CERTS`, or the
//! caller's `ca`), client certificates, ALPN `http/1.1`, session resumption shared by an
//! origin's connections, and certificate errors reported with Node's codes.

use std::fmt;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

use crate::error::{Error, Result};

/// What the caller asks of TLS (Node's `tls.connect` options that apply).
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    /// The name to verify and send as SNI (an IP literal is verified, not sent).
    pub server_name: String,
    /// PEM: trusted roots instead of the default ones.
    pub ca: Option<Vec<u8>>,
    /// PEM: client certificate chain and its key.
    pub cert: Option<Vec<u8>>,
    pub key: Option<Vec<u8>>,
    /// Verify the server's certificate (Node's `rejectUnauthorized`, default true).
    pub reject_unauthorized: bool,
}

/// A built TLS client configuration; cheap to clone, shared by an origin's connections
/// (so they resume each other's sessions).
#[derive(Clone)]
pub struct TlsConfig {
    pub config: Arc<ClientConfig>,
    pub server_name: ServerName<'static>,
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TlsConfig({:?})", self.server_name)
    }
}

fn invalid(what: &str, e: impl fmt::Display) -> Error {
    Error::InvalidArgument(format!("invalid {what}: {e}"))
}

fn certs(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| invalid(what, e))?;
    if certs.is_empty() {
        return Err(invalid(what, "no certificate found"));
    }
    Ok(certs)
}

/// Mozilla's roots, plus the certificates in `NODE_EXTRA_CA_CERTS` as Node adds them.
fn default_roots() -> RootCertStore {
    let mut roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    if let Some(path) = std::env::var_os("NODE_EXTRA_CA_CERTS") {
        // As Node: an unreadable file is not fatal (Node only warns).
        if let Ok(pem) = std::fs::read(path) {
            for cert in CertificateDer::pem_slice_iter(&pem).flatten() {
                let _ = roots.add(cert);
            }
        }
    }
    roots
}

impl TlsConfig {
    pub fn new(opts: &TlsOptions) -> Result<TlsConfig> {
        let provider = Arc::new(ring::default_provider());
        let verifier: Arc<dyn ServerCertVerifier> = if opts.reject_unauthorized {
            let roots = match &opts.ca {
                Some(pem) => {
                    let mut roots = RootCertStore::empty();
                    for cert in certs(pem, "ca")? {
                        roots.add(cert).map_err(|e| invalid("ca", e))?;
                    }
                    roots
                }
                None => default_roots(),
            };
            let webpki =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|e| invalid("ca", e))?;
            Arc::new(NodeVerifier {
                webpki: Some(webpki),
                provider: provider.clone(),
            })
        } else {
            Arc::new(NodeVerifier {
                webpki: None,
                provider: provider.clone(),
            })
        };
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid("tls options", e))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let mut config = match (&opts.cert, &opts.key) {
            (Some(cert), Some(key)) => {
                let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| invalid("key", e))?;
                builder
                    .with_client_auth_cert(certs(cert, "cert")?, key)
                    .map_err(|e| invalid("cert", e))?
            }
            (None, None) => builder.with_no_client_auth(),
            _ => {
                return Err(Error::InvalidArgument(
                    "cert and key must be given together".into(),
                ))
            }
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let host = opts
            .server_name
            .trim_start_matches('[')
            .trim_end_matches(']');
        let server_name =
            ServerName::try_from(host.to_owned()).map_err(|e| invalid("servername", e))?;
        Ok(TlsConfig {
            config: Arc::new(config),
            server_name,
        })
    }
}

/// A certificate problem under Node's name for it.
#[derive(Debug)]
pub struct NodeCertError {
    pub code: &'static str,
    pub message: String,
}

impl fmt::Display for NodeCertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for NodeCertError {}

/// webpki's verification, with its failures renamed as Node (OpenSSL) names them;
/// no verification at all when `rejectUnauthorized` is false.
#[derive(Debug)]
struct NodeVerifier {
    webpki: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for NodeVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let Some(webpki) = &self.webpki else {
            return Ok(ServerCertVerified::assertion());
        };
        webpki
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
            .map_err(
                |e| match node_cert_error(&e, end_entity, intermediates, server_name) {
                    Some(node) => rustls::Error::InvalidCertificate(CertificateError::Other(
                        rustls::OtherError(Arc::new(node)),
                    )),
                    None => e,
                },
            )
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

fn node_cert_error(
    e: &rustls::Error,
    leaf: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
    server_name: &ServerName<'_>,
) -> Option<NodeCertError> {
    let rustls::Error::InvalidCertificate(cert_error) = e else {
        return None;
    };
    let lone_self_signed = intermediates.is_empty() && self_issued(leaf);
    let (code, message) = match cert_error {
        // An untrusted self-signed leaf: webpki says unknown issuer, or CA used as end entity
        // when it carries CA constraints.
        CertificateError::UnknownIssuer | CertificateError::Other(_) if lone_self_signed => (
            "DEPTH_ZERO_SELF_SIGNED_CERT",
            "self-signed certificate".into(),
        ),
        CertificateError::UnknownIssuer => {
            if intermediates.iter().any(|c| self_issued(c)) {
                (
                    "SELF_SIGNED_CERT_IN_CHAIN",
                    "self-signed certificate in certificate chain".into(),
                )
            } else if intermediates.is_empty() {
                (
                    "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
                    "unable to verify the first certificate".into(),
                )
            } else {
                (
                    "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
                    "unable to get local issuer certificate".into(),
                )
            }
        }
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            // As OpenSSL lists them: `DNS:example.com, IP Address:127.0.0.1`.
            let presented = match cert_error {
                CertificateError::NotValidForNameContext { presented, .. } => presented
                    .iter()
                    .map(|p| {
                        let inner = |prefix: &str| {
                            p.strip_prefix(prefix)
                                .map(|v| v.trim_end_matches(')').trim_matches('"').to_owned())
                        };
                        match (inner("DnsName("), inner("IpAddress(")) {
                            (Some(dns), _) => format!("DNS:{dns}"),
                            (_, Some(ip)) => format!("IP Address:{ip}"),
                            _ => p.clone(),
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
                _ => String::new(),
            };
            let host = match server_name {
                ServerName::DnsName(d) => format!("Host: {}.", d.as_ref()),
                ServerName::IpAddress(ip) => format!("IP: {}", std::net::IpAddr::from(*ip)),
                _ => "Host".into(),
            };
            (
                "ERR_TLS_CERT_ALTNAME_INVALID",
                format!(
                    "Hostname/IP does not match certificate's altnames: {host} is not in the cert's altnames: {presented}"
                ),
            )
        }
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            ("CERT_HAS_EXPIRED", "certificate has expired".into())
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            ("CERT_NOT_YET_VALID", "certificate is not yet valid".into())
        }
        CertificateError::BadSignature => (
            "CERT_SIGNATURE_FAILURE",
            "certificate signature failure".into(),
        ),
        _ => return None,
    };
    Some(NodeCertError { code, message })
}

/// The Node-style error for a failed handshake: the certificate error's code where there
/// is one, otherwise a socket error with rustls' words.
pub fn handshake_error(e: &std::io::Error) -> Error {
    let node = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .and_then(|tls| match tls {
            rustls::Error::InvalidCertificate(CertificateError::Other(other)) => {
                other.0.downcast_ref::<NodeCertError>()
            }
            _ => None,
        });
    let tls = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
    match node {
        Some(n) => Error::Socket {
            code: Some(n.code.into()),
            message: n.message.clone(),
            socket: None,
        },
        // What OpenSSL says when the server does not speak TLS at all.
        None if matches!(
            tls,
            Some(rustls::Error::InvalidMessage(
                rustls::InvalidMessage::InvalidContentType
            ))
        ) =>
        {
            Error::Socket {
                code: Some("ERR_SSL_WRONG_VERSION_NUMBER".into()),
                message: "wrong version number".into(),
                socket: None,
            }
        }
        None if tls.is_some() => Error::Socket {
            code: Some("ERR_SSL_HANDSHAKE_FAILURE".into()),
            message: format!("TLS handshake failed: {e}"),
            socket: None,
        },
        None => Error::from_io(e),
    }
}

/// Whether a certificate's issuer is its subject (a self-signed certificate).
fn self_issued(cert: &CertificateDer<'_>) -> bool {
    issuer_and_subject(cert).is_some_and(|(issuer, subject)| issuer == subject)
}

/// The raw issuer and subject names of a DER certificate.
fn issuer_and_subject(der: &[u8]) -> Option<(&[u8], &[u8])> {
    let (_, cert, _) = tlv(der)?;
    let (_, mut tbs, _) = tlv(cert)?;
    let mut fields = Vec::with_capacity(6);
    while fields.len() < 6 && !tbs.is_empty() {
        let (tag, _, rest) = tlv(tbs)?;
        fields.push((tag, &tbs[..tbs.len() - rest.len()]));
        tbs = rest;
    }
    // [0] version is optional; then serial, signature, issuer, validity, subject.
    let skip = usize::from(fields.first()?.0 == 0xa0);
    Some((fields.get(skip + 2)?.1, fields.get(skip + 4)?.1))
}

/// One DER element: its tag, its content, and what follows it.
fn tlv(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = b.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        first as usize
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | b as usize);
        rest = &rest[n..];
        len
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn der_walker_finds_issuer_and_subject() {
        // Certificate { TBS { [0]{v3}, serial, alg, issuer, validity, subject, ... } }
        let name_a = [0x30, 0x03, 0x02, 0x01, 0x0a];
        let name_b = [0x30, 0x03, 0x02, 0x01, 0x0b];
        let mut tbs = vec![0xa0, 0x03, 0x02, 0x01, 0x02, 0x02, 0x01, 0x01, 0x30, 0x00];
        tbs.extend_from_slice(&name_a);
        tbs.extend_from_slice(&[0x30, 0x00]);
        tbs.extend_from_slice(&name_b);
        let mut tbs_tlv = vec![0x30, tbs.len() as u8];
        tbs_tlv.extend_from_slice(&tbs);
        let mut cert = vec![0x30, tbs_tlv.len() as u8];
        cert.extend_from_slice(&tbs_tlv);
        assert_eq!(issuer_and_subject(&cert), Some((&name_a[..], &name_b[..])));
        assert!(!self_issued(&CertificateDer::from(cert.clone())));
        assert_eq!(issuer_and_subject(&cert[..cert.len() - 2]), None);
    }

    #[test]
    fn bad_pem_is_an_invalid_argument() {
        let opts = TlsOptions {
            server_name: "localhost".into(),
            ca: Some(b"not a certificate".to_vec()),
            reject_unauthorized: true,
            ..Default::default()
        };
        assert!(matches!(
            TlsConfig::new(&opts),
            Err(Error::InvalidArgument(_))
        ));
        let opts = TlsOptions {
            server_name: "localhost".into(),
            reject_unauthorized: true,
            ..Default::default()
        };
        let cfg = TlsConfig::new(&opts).unwrap();
        assert_eq!(cfg.config.alpn_protocols, vec![b"http/1.1".to_vec()]);
    }
}
