//! TLS for `https:` origins, with rustls: roots (Mozilla's, `NODE_EXTRA_CA_CERTS`, or the
//! caller's `ca`), client certificates, ALPN `http/1.1` (after `h2` where the origin allows
//! HTTP/2), session resumption shared by an origin's connections, and certificate errors
//! reported with Node's codes.
//!
//! What rustls cannot do that Node's TLS (OpenSSL) does is told apart from a verdict Node would
//! reach too ([`needs_node`]): legacy keys and signatures, protocol versions and ciphers
//! rustls lacks, certificates webpki refuses to parse, a name only in the subject's CN. The
//! connection is then made with Node's TLS instead (see [`super::Connector`]). A self-signed
//! leaf trusted as it is (in `ca`, as `openssl req -x509` makes development certificates, with
//! CA:TRUE) is accepted here, as OpenSSL accepts it.

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
    /// Sessions kept for resumption (undici's `maxCachedSessions`); `None`: rustls' default.
    pub max_cached_sessions: Option<usize>,
    /// Node's `minVersion: 'TLSv1.3'` (else TLS 1.2 and 1.3).
    pub min_tls13: bool,
    /// Node's `maxVersion: 'TLSv1.2'`.
    pub max_tls12: bool,
}

/// A built TLS client configuration; cheap to clone, shared by an origin's connections
/// (so they resume each other's sessions).
#[derive(Clone)]
pub struct TlsConfig {
    pub config: Arc<ClientConfig>,
    pub server_name: ServerName<'static>,
    /// QUIC's certificate verifier: `config`'s, keeping its refusals (see [`Self::quic`]). One
    /// for all of the origin's QUIC connections: rustls resumes a session only under the
    /// verifier that made it.
    quic_verifier: Arc<Recording>,
    /// TLS 1.3 is allowed (QUIC's only version).
    tls13: bool,
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TlsConfig({:?})", self.server_name)
    }
}

/// A TLS server name from a host or `servername` (an IPv6 literal may keep its brackets).
pub fn server_name(host: &str) -> Result<ServerName<'static>> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_owned()).map_err(|e| invalid("servername", e))
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

/// Mozilla's roots, plus the certificates in `NODE_EXTRA_CA_CERTS` as Node adds them (also
/// returned: a self-signed leaf among them is trusted as it is).
fn default_roots() -> (RootCertStore, Vec<CertificateDer<'static>>) {
    let mut roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let mut extra = Vec::new();
    if let Some(path) = std::env::var_os("NODE_EXTRA_CA_CERTS") {
        // As Node: an unreadable file is not fatal (Node only warns).
        if let Ok(pem) = std::fs::read(path) {
            for cert in CertificateDer::pem_slice_iter(&pem).flatten() {
                if roots.add(cert.clone()).is_ok() {
                    extra.push(cert);
                }
            }
        }
    }
    (roots, extra)
}

impl TlsConfig {
    pub fn new(opts: &TlsOptions) -> Result<TlsConfig> {
        let provider = Arc::new(ring::default_provider());
        let verifier: Arc<dyn ServerCertVerifier> = if opts.reject_unauthorized {
            let (roots, trusted) = match &opts.ca {
                Some(pem) => {
                    let mut roots = RootCertStore::empty();
                    let trusted = certs(pem, "ca")?;
                    for cert in &trusted {
                        roots.add(cert.clone()).map_err(|e| invalid("ca", e))?;
                    }
                    (roots, trusted)
                }
                None => default_roots(),
            };
            let webpki =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|e| invalid("ca", e))?;
            Arc::new(NodeVerifier {
                webpki: Some(webpki),
                trusted,
                provider: provider.clone(),
            })
        } else {
            Arc::new(NodeVerifier {
                webpki: None,
                trusted: Vec::new(),
                provider: provider.clone(),
            })
        };
        let versions: &[&rustls::SupportedProtocolVersion] = match (opts.min_tls13, opts.max_tls12)
        {
            (false, false) => rustls::DEFAULT_VERSIONS,
            (false, true) => &[&rustls::version::TLS12],
            (true, false) => &[&rustls::version::TLS13],
            (true, true) => {
                return Err(Error::InvalidArgument(
                    "minVersion TLSv1.3 is above maxVersion TLSv1.2".into(),
                ))
            }
        };
        let builder = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(versions)
            .map_err(|e| invalid("tls options", e))?
            .dangerous()
            .with_custom_certificate_verifier(verifier.clone());
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
        match opts.max_cached_sessions {
            Some(0) => config.resumption = rustls::client::Resumption::disabled(),
            Some(n) => config.resumption = rustls::client::Resumption::in_memory_sessions(n),
            None => {}
        }
        Ok(TlsConfig {
            config: Arc::new(config),
            server_name: server_name(&opts.server_name)?,
            quic_verifier: Arc::new(Recording {
                inner: verifier,
                refusal: Arc::default(),
            }),
            tls13: !opts.max_tls12,
        })
    }

    /// The TLS of one QUIC connection (HTTP/3): the same roots, verification, client
    /// certificate and session store, ALPN `h3`, and TLS 1.3 (QUIC's only version: an origin
    /// limited to TLS 1.2 gets an error). Its verifier keeps the last certificate refusal:
    /// quinn passes on only the words of a TLS error, not the error. `early_data`: send
    /// requests in 0-RTT where a session is resumed (`h3ZeroRtt`).
    pub(crate) fn quic(&self, early_data: bool) -> Result<QuicTls> {
        if !self.allows_tls13() {
            return Err(Error::InvalidArgument(
                "HTTP/3 needs TLS 1.3 (maxVersion is TLSv1.2)".into(),
            ));
        }
        let refusal = self.quic_verifier.refusal.clone();
        // (A refusal left by an earlier handshake is not this one's.)
        refusal.lock().unwrap_or_else(|e| e.into_inner()).take();
        let mut config = (*self.config).clone();
        config.alpn_protocols = vec![b"h3".to_vec()];
        config.enable_early_data = early_data;
        config
            .dangerous()
            .set_certificate_verifier(self.quic_verifier.clone());
        Ok(QuicTls {
            config: Arc::new(config),
            refusal,
        })
    }

    /// Whether TLS 1.3, QUIC's only version, is allowed (not with `maxVersion: 'TLSv1.2'`).
    pub(crate) fn allows_tls13(&self) -> bool {
        self.tls13
    }

    /// The name later handshakes send and verify (a request's own `servername`); sessions
    /// stay shared, rustls keys them by name.
    pub fn rename(&mut self, name: ServerName<'static>) {
        self.server_name = name;
    }

    /// Offers ALPN `h2` too (undici's `allowH2`), after `http/1.1` as undici's list has it, or
    /// first (`prefer`, its `connect.preferH2`): the server chooses. Sessions stay shared with
    /// the configuration it was made from.
    pub fn offer_h2(&mut self, prefer: bool) {
        let mut config = (*self.config).clone();
        config.alpn_protocols = if prefer {
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        } else {
            vec![b"http/1.1".to_vec(), b"h2".to_vec()]
        };
        self.config = Arc::new(config);
    }
}

/// A QUIC connection's TLS (see [`TlsConfig::quic`]).
pub(crate) struct QuicTls {
    pub config: Arc<ClientConfig>,
    refusal: Arc<std::sync::Mutex<Option<rustls::Error>>>,
}

impl QuicTls {
    /// Why the handshake refused the server's certificate, as the TLS path words it over TCP
    /// ([`handshake_error`]: Node's code and message), if it did.
    pub(crate) fn refusal(&self) -> Option<Error> {
        let refusal = self
            .refusal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()?;
        Some(handshake_error(&std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            refusal,
        )))
    }
}

/// A verifier that keeps the refusal of the one it wraps.
#[derive(Debug)]
struct Recording {
    inner: Arc<dyn ServerCertVerifier>,
    refusal: Arc<std::sync::Mutex<Option<rustls::Error>>>,
}

impl ServerCertVerifier for Recording {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let verdict =
            self.inner
                .verify_server_cert(end_entity, intermediates, server_name, ocsp, now);
        if let Err(e) = &verdict {
            *self.refusal.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.clone());
        }
        verdict
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
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

/// Why a certificate was refused: Node's name for it where there is one, and whether Node's
/// TLS might decide otherwise (see [`needs_node`]).
#[derive(Debug)]
struct CertFailure {
    node: Option<NodeCertError>,
    needs_node: bool,
    cause: rustls::Error,
}

impl fmt::Display for CertFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.node {
            Some(n) => f.write_str(&n.message),
            None => write!(f, "{}", self.cause),
        }
    }
}

impl std::error::Error for CertFailure {}

impl CertFailure {
    fn into_rustls(self) -> rustls::Error {
        rustls::Error::InvalidCertificate(CertificateError::Other(rustls::OtherError(Arc::new(
            self,
        ))))
    }
}

/// webpki's verification, with its failures renamed as Node (OpenSSL) names them;
/// no verification at all when `rejectUnauthorized` is false.
#[derive(Debug)]
struct NodeVerifier {
    webpki: Option<Arc<WebPkiServerVerifier>>,
    /// The roots given beside Mozilla's (`ca`, `NODE_EXTRA_CA_CERTS`).
    trusted: Vec<CertificateDer<'static>>,
    provider: Arc<CryptoProvider>,
}

impl NodeVerifier {
    /// A self-signed leaf that is one of the trusted roots: trusted as it is, as OpenSSL does
    /// (which webpki refuses, CA:TRUE as `openssl req -x509` makes it, or signed with SHA-1).
    /// Its dates and names are checked here; where this cannot tell, Node's TLS decides.
    fn trusted_leaf(
        &self,
        leaf: &CertificateDer<'_>,
        server_name: &ServerName<'_>,
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let undecided = |cause: rustls::Error| CertFailure {
            node: None,
            needs_node: true,
            cause,
        };
        let Some((not_before, not_after)) = validity(leaf) else {
            return Err(undecided(CertificateError::BadEncoding.into()).into_rustls());
        };
        let now = now.as_secs() as i64;
        let dated = if now < not_before {
            Some(CertificateError::NotValidYet)
        } else if now > not_after {
            Some(CertificateError::Expired)
        } else {
            None
        };
        let named = webpki::EndEntityCert::try_from(leaf)
            .map_err(|_| undecided(CertificateError::BadEncoding.into()).into_rustls())?
            .verify_is_valid_for_subject_name(server_name);
        let cause: rustls::Error = match (dated, named) {
            (Some(e), _) => e.into(),
            (None, Ok(())) => return Ok(ServerCertVerified::assertion()),
            (None, Err(webpki::Error::CertNotValidForName(cx))) => {
                CertificateError::NotValidForNameContext {
                    expected: server_name.to_owned(),
                    presented: cx.presented,
                }
                .into()
            }
            (None, Err(_)) => {
                return Err(undecided(CertificateError::BadEncoding.into()).into_rustls())
            }
        };
        Err(self.refusal(cause, leaf, &[], server_name))
    }

    /// `cause` as the handshake reports it: with Node's code, and marked for Node's TLS to
    /// decide where rustls lacks what it would take.
    fn refusal(
        &self,
        cause: rustls::Error,
        leaf: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
    ) -> rustls::Error {
        CertFailure {
            node: node_cert_error(&cause, leaf, intermediates, server_name),
            needs_node: undecided(&cause, leaf, intermediates, server_name),
            cause,
        }
        .into_rustls()
    }
}

/// Whether a refusal may be rustls' own limit rather than a verdict OpenSSL reaches too.
#[allow(deprecated)] // webpki still reports the variants without context
fn undecided(
    e: &rustls::Error,
    leaf: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
    server_name: &ServerName<'_>,
) -> bool {
    let rustls::Error::InvalidCertificate(cert_error) = e else {
        return false;
    };
    // What webpki found first in a chain ring cannot verify need not be what OpenSSL finds
    // first (Node 24's reports the weak key before the untrusted issuer): Node decides.
    if std::iter::once(leaf).chain(intermediates).any(|c| weak(c)) {
        return true;
    }
    match cert_error {
        // ring verifies no RSA key under 2048 bits, no SHA-1 or MD5 signature.
        CertificateError::BadSignature
        | CertificateError::BadEncoding
        | CertificateError::UnsupportedSignatureAlgorithm
        | CertificateError::UnsupportedSignatureAlgorithmContext { .. }
        | CertificateError::UnsupportedSignatureAlgorithmForPublicKeyContext { .. } => true,
        // No DNS name among the altnames: Node falls back on the subject's CN, webpki does not.
        CertificateError::NotValidForNameContext { presented, .. } => {
            matches!(server_name, ServerName::DnsName(_))
                && !presented.iter().any(|p| p.starts_with("DnsName("))
        }
        CertificateError::Other(other) => match other.0.downcast_ref::<webpki::Error>() {
            // An untrusted self-signed leaf is DEPTH_ZERO_SELF_SIGNED_CERT to Node too.
            Some(webpki::Error::CaUsedAsEndEntity) => {
                !(intermediates.is_empty() && self_issued(leaf))
            }
            Some(
                webpki::Error::UnsupportedCertVersion
                | webpki::Error::UnsupportedCriticalExtension
                | webpki::Error::ExtensionValueInvalid
                | webpki::Error::InvalidSerialNumber
                | webpki::Error::MalformedExtensions
                | webpki::Error::MalformedDnsIdentifier
                | webpki::Error::UnsupportedNameType
                | webpki::Error::EmptyEkuExtension
                | webpki::Error::TrailingData(_)
                | webpki::Error::BadDerTime,
            ) => true,
            _ => false,
        },
        _ => false,
    }
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
            .or_else(|e| {
                let as_it_is = self_issued(end_entity)
                    && self
                        .trusted
                        .iter()
                        .any(|t| t.as_ref() == end_entity.as_ref());
                if as_it_is {
                    return self.trusted_leaf(end_entity, server_name, now);
                }
                Err(self.refusal(e, end_entity, intermediates, server_name))
            })
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
            // The names as OpenSSL lists them (`DNS:example.com, IP Address:127.0.0.1`), and
            // the IP addresses alone.
            let presented = match cert_error {
                CertificateError::NotValidForNameContext { presented, .. } => presented.as_slice(),
                _ => &[],
            };
            let inner = |p: &str, prefix: &str| {
                p.strip_prefix(prefix)
                    .map(|v| v.trim_end_matches(')').trim_matches('"').to_owned())
            };
            let ips: Vec<String> = presented
                .iter()
                .filter_map(|p| inner(p, "IpAddress("))
                .collect();
            let all: Vec<String> = presented
                .iter()
                .map(|p| match (inner(p, "DnsName("), inner(p, "IpAddress(")) {
                    (Some(dns), _) => format!("DNS:{dns}"),
                    (_, Some(ip)) => format!("IP Address:{ip}"),
                    _ => p.clone(),
                })
                .collect();
            // As Node's checkServerIdentity words it.
            let reason = match server_name {
                ServerName::IpAddress(ip) => format!(
                    "IP: {} is not in the cert's list: {}",
                    std::net::IpAddr::from(*ip),
                    ips.join(", ")
                ),
                ServerName::DnsName(d) => format!(
                    "Host: {}. is not in the cert's altnames: {}",
                    d.as_ref(),
                    all.join(", ")
                ),
                _ => "Unknown reason".into(),
            };
            (
                "ERR_TLS_CERT_ALTNAME_INVALID",
                format!("Hostname/IP does not match certificate's altnames: {reason}"),
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
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
            ("INVALID_PURPOSE", "unsupported certificate purpose".into())
        }
        _ => return None,
    };
    Some(NodeCertError { code, message })
}

/// The Node-style error for a failed handshake: the certificate error's code where there
/// is one, otherwise a socket error with rustls' words.
pub fn handshake_error(e: &std::io::Error) -> Error {
    let tls = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
    let node = cert_failure(tls).and_then(|f| f.node.as_ref());
    match node {
        Some(n) => Error::coded(n.code, n.message.clone()),
        // What OpenSSL says when the server does not speak TLS at all.
        None if matches!(
            tls,
            Some(rustls::Error::InvalidMessage(
                rustls::InvalidMessage::InvalidContentType
            ))
        ) =>
        {
            Error::coded("ERR_SSL_WRONG_VERSION_NUMBER", "wrong version number")
        }
        None if tls.is_some() => Error::coded(
            "ERR_SSL_HANDSHAKE_FAILURE",
            format!("TLS handshake failed: {e}"),
        ),
        None => Error::from_io(e),
    }
}

fn cert_failure(tls: Option<&rustls::Error>) -> Option<&CertFailure> {
    match tls? {
        rustls::Error::InvalidCertificate(CertificateError::Other(other)) => {
            other.0.downcast_ref::<CertFailure>()
        }
        _ => None,
    }
}

/// Whether a failed handshake is one Node's TLS may complete: rustls lacks a capability it
/// would take (a verdict Node would reach too is not one of them). The server may have:
/// refused what rustls offers (versions, ciphers), signed with a key or algorithm ring does
/// not verify (RSA under 2048 bits ...), or sent a certificate webpki cannot judge.
#[allow(deprecated)] // as in `undecided`
pub fn needs_node(e: &std::io::Error) -> bool {
    let tls = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
    if let Some(f) = cert_failure(tls) {
        return f.needs_node;
    }
    use rustls::AlertDescription as A;
    matches!(
        tls,
        Some(
            rustls::Error::PeerIncompatible(_)
                | rustls::Error::AlertReceived(
                    A::HandshakeFailure | A::ProtocolVersion | A::InsufficientSecurity
                )
                // The handshake's own signature (TLS 1.2's key exchange, 1.3's CertificateVerify).
                | rustls::Error::InvalidCertificate(
                    CertificateError::BadSignature
                        | CertificateError::UnsupportedSignatureAlgorithm
                        | CertificateError::UnsupportedSignatureAlgorithmContext { .. }
                        | CertificateError::UnsupportedSignatureAlgorithmForPublicKeyContext { .. }
                )
        )
    )
}

/// A certificate's validity, `notBefore` and `notAfter`, in seconds since the epoch.
fn validity(der: &[u8]) -> Option<(i64, i64)> {
    let fields = tbs_fields(der)?;
    let skip = usize::from(fields.first()?.0 == 0xa0);
    let (_, validity, _) = tlv(fields.get(skip + 3)?.1)?;
    let (t1, v1, rest) = tlv(validity)?;
    let (t2, v2, _) = tlv(rest)?;
    Some((asn1_time(t1, v1)?, asn1_time(t2, v2)?))
}

/// An ASN.1 UTCTime (`YYMMDDHHMMSSZ`, 1950 to 2049) or GeneralizedTime (`YYYYMMDDHHMMSSZ`).
fn asn1_time(tag: u8, v: &[u8]) -> Option<i64> {
    let digits = |s: &[u8]| -> Option<i64> {
        s.iter().try_fold(0i64, |acc, &b| {
            b.is_ascii_digit().then(|| acc * 10 + i64::from(b - b'0'))
        })
    };
    let (year, rest) = match (tag, v.len()) {
        (0x17, 13) => {
            let yy = digits(&v[..2])?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &v[2..])
        }
        (0x18, 15) => (digits(&v[..4])?, &v[4..]),
        _ => return None,
    };
    if rest[10] != b'Z' {
        return None;
    }
    let [mo, d, h, mi, s] = [0, 2, 4, 6, 8].map(|i| digits(&rest[i..i + 2]));
    let (mo, d, h, mi, s) = (mo?, d?, h?, mi?, s?);
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if mo > 2 { mo - 3 } else { mo + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + mi * 60 + s)
}

/// Whether a certificate's issuer is its subject (a self-signed certificate).
fn self_issued(cert: &CertificateDer<'_>) -> bool {
    issuer_and_subject(cert).is_some_and(|(issuer, subject)| issuer == subject)
}

/// The raw issuer and subject names of a DER certificate.
fn issuer_and_subject(der: &[u8]) -> Option<(&[u8], &[u8])> {
    let fields = tbs_fields(der)?;
    // [0] version is optional; then serial, signature, issuer, validity, subject.
    let skip = usize::from(fields.first()?.0 == 0xa0);
    Some((fields.get(skip + 2)?.1, fields.get(skip + 4)?.1))
}

/// Keyed or signed below what ring verifies: an RSA key under 2048 bits, a SHA-1 or MD5
/// signature.
fn weak(der: &[u8]) -> bool {
    const RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
    const WEAK_SIGNATURES: [&[u8]; 3] = [
        &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x04], // md5WithRSAEncryption
        &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x05], // sha1WithRSAEncryption
        &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x01],             // ecdsa-with-SHA1
    ];
    // An AlgorithmIdentifier's OID, from its content.
    fn oid(alg: &[u8]) -> Option<&[u8]> {
        tlv(alg).and_then(|(tag, oid, _)| (tag == 0x06).then_some(oid))
    }
    let Some(fields) = tbs_fields(der) else {
        return false;
    };
    let skip = usize::from(fields.first().is_some_and(|f| f.0 == 0xa0));
    let signature = fields.get(skip + 1).and_then(|f| oid(tlv(f.1)?.1));
    // SubjectPublicKeyInfo: algorithm, then the key as a BIT STRING (RSA: modulus, exponent).
    let rsa_bits = fields.get(skip + 5).and_then(|f| {
        let (_, spki, _) = tlv(f.1)?;
        let (_, alg, rest) = tlv(spki)?;
        if oid(alg)? != RSA {
            return None;
        }
        let (_, key, _) = tlv(rest)?;
        let (_, rsa, _) = tlv(key.get(1..)?)?;
        let (_, modulus, _) = tlv(rsa)?;
        let zeros = modulus.iter().take_while(|&&b| b == 0).count();
        Some((modulus.len() - zeros) * 8)
    });
    signature.is_some_and(|s| WEAK_SIGNATURES.contains(&s)) || rsa_bits.is_some_and(|b| b < 2048)
}

/// The first seven elements of a DER certificate's TBSCertificate (to the subject's public
/// key): (tag, whole element).
fn tbs_fields(der: &[u8]) -> Option<Vec<(u8, &[u8])>> {
    let (_, cert, _) = tlv(der)?;
    let (_, mut tbs, _) = tlv(cert)?;
    let mut fields = Vec::with_capacity(7);
    while fields.len() < 7 && !tbs.is_empty() {
        let (tag, _, rest) = tlv(tbs)?;
        fields.push((tag, &tbs[..tbs.len() - rest.len()]));
        tbs = rest;
    }
    Some(fields)
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

    // Made with `openssl req -x509 -newkey ... -sha1|-sha256`.
    const RSA_1024_SHA1: &str = "-----BEGIN CERTIFICATE-----
MIIB+jCCAWOgAwIBAgIUHqJkxaObWNzu77VHF7NpizeMzAUwDQYJKoZIhvcNAQEF
BQAwDzENMAsGA1UEAwwEd2VhazAeFw0yNjExMjQwMjEyNTBaFw0zNjExMjEwMjEy
NTBaMA8xDTALBgNVBAMMBHdlYWswgZ8wDQYJKoZIhvcNAQEBBQADgY0AMIGJAoGB
AMWwdSfVr+2r0e0zEZK4XEJ8AkVzUJ6jSDB4RLOjKLnPU8ro1sqlzTFmYkXXwhWk
aXXqu+FMoNa4eND/mqeIgEsSxxYJwRFjs/EzeOP2SeeCFXyNgGuVByaYADaAaXHw
aejBSK+IpLcT1ik+deaT1FLUvvvXBBceCF2YTago5YqnAgMBAAGjUzBRMB0GA1Ud
DgQWBBRDMmJnE4Zbe+CEmFxWamIkmY3jeTAfBgNVHSMEGDAWgBRDMmJnE4Zbe+CE
mFxWamIkmY3jeTAPBgNVHRMBAf8EBTADAQH/MA0GCSqGSIb3DQEBBQUAA4GBAHPD
k5WNEAWd8vVPOcIIHa3VeIMUAQuqdOF9XDV8Y1xt2vp7EAnb8gHpRrVfQ4KZgIJw
wETgOK6EA6cqqLN/iFXFr790kd01xOz5+fkt1dEZBNvbw50aSxLxlJU/F2/VzVYa
hQTkVVc7Rs5a1gV7NO9wFBgi02I3Q8o4igQB5cPi
-----END CERTIFICATE-----\n";

    const RSA_2048_SHA1: &str = "-----BEGIN CERTIFICATE-----
MIIC/zCCAeegAwIBAgIUZY5h0FLww+5jD7xTQ/xk1IVN094wDQYJKoZIhvcNAQEF
BQAwDzENMAsGA1UEAwwEc2hhMTAeFw0yNjExMjQwMjEyNTBaFw0zNjExMjEwMjEy
NTBaMA8xDTALBgNVBAMMBHNoYTEwggEiMA0GCSqGSIb3DQEBAQUAA4IBDwAwggEK
AoIBAQC0bmQ6LzcqvBDZ47xG8IVugohCDUPRlZpK/CT4dc6PBSifhq/FPDe3Y0V4
3W4fOelc2Fr4rzyGJ7QrFmZQo7ukOCHaI5VkKWocYVYlWm9uO3XGxpMMZeA98hmJ
Q3jQ2YArLhsh42SG+isyB/yATHNX0eqhzETNEteY/FSpGQWlxQK6rwqhCPl3hH+A
dG0lDTBZ/RyaAX9AakFq1w4Z4gBtBURGj6Ri3VSC4C20LUrA93nwPU0P+VR1sSWN
CONWmRR70b/N5ncGMrBCyPB4kx9w/+IOO5etIPptGzwFHfj8IcI1AiguCvMhxTEz
8L5Vz2HxnVBhrF4kPkL79VDcL/q1AgMBAAGjUzBRMB0GA1UdDgQWBBQN0jEBhYGe
DGPWzniBOPyTayrDbjAfBgNVHSMEGDAWgBQN0jEBhYGeDGPWzniBOPyTayrDbjAP
BgNVHRMBAf8EBTADAQH/MA0GCSqGSIb3DQEBBQUAA4IBAQBLdbMY2wivmojmbcb7
X+nRELDztXi02snfcxLivsYD2yewXduKIIopJTR31xqHfCod8oMViqzJpgEdxRXd
7q8FuL/SNTiKJriMgxRjyR1ZJV7M8iwP63+7fMrAkRmSzds4OIbxuAaFPFlWxJ59
Doa9Dchp/PLyMeL4QTrydX84goLDdBf7TpL+wpsIwSujrEfChAHcId1NAldB5Uou
yLFQDtpFaeECl8rOKbVYZg+rEVno4B/8VI1FuxeNEMVGgBw+r24wz8TBen+mT1xM
GKbAor08/jWtksiz7j6dUJmFoP7zH4ygt/5U2QcEweqFWMhLknw99mv75IBgY87s
Siar
-----END CERTIFICATE-----\n";

    const EC_SHA256: &str = "-----BEGIN CERTIFICATE-----
MIIBbjCCARWgAwIBAgIUK+Z66gbVZrEeTWrMH6wszTlOJTkwCgYIKoZIzj0EAwIw
DTELMAkGA1UEAwwCZWMwHhcNMjYxMTI0MDIxMjUwWhcNMzYxMTIxMDIxMjUwWjAN
MQswCQYDVQQDDAJlYzBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABIAQvWSxmqgC
VkyaXs+M1RujKbF5KmG6gFxT0bKVTzc38vZXDmTSTbmYYjp8S6TiADJp58iG8rU9
pXzDMyqNwX2jUzBRMB0GA1UdDgQWBBRYz9CozuNkoOHIvUs2G6saOo08DTAfBgNV
HSMEGDAWgBRYz9CozuNkoOHIvUs2G6saOo08DTAPBgNVHRMBAf8EBTADAQH/MAoG
CCqGSM49BAMCA0cAMEQCICxJfX3wcJPUbBM9NDBdScL0P+tjPfcC4KNh/jPDxz0T
AiBPpnUsIuI626UEh/AMXXhaUK2y01yowQkmsGHhIT/xEQ==
-----END CERTIFICATE-----\n";

    const RSA_2048_SHA256: &str = "-----BEGIN CERTIFICATE-----
MIIDHzCCAgegAwIBAgIUXAa4dwXwzFZpZn0aPdUzRdF7OAkwDQYJKoZIhvcNAQEL
BQAwFDESMBAGA1UEAwwJbG9jYWxob3N0MB4XDTI2MTEyNDAyMTE0N1oXDTI2MTIy
NDAyMTE0N1owFDESMBAGA1UEAwwJbG9jYWxob3N0MIIBIjANBgkqhkiG9w0BAQEF
AAOCAQ8AMIIBCgKCAQEAxExIfg7sGhCk6eRTmDQEe10lqKu/NAGxovD2BDDW5odF
uAW+9NzHuth/BzcwPQK+lBIXSsmQ4yND+HbJmfEPxuKO08C6+EW5aZg2FNfGFca2
Qh7pglXY4PRuMOI3z7ZDviemMeOQPL9hAqf1J/bAN3r841nVc2Vibf9My4qTPeHL
upfEXfe/LL+6qi7KjYDI+PjYrT332RHv9yLLpj8dpc5FnGlT1Jfhd2ajTAdB5Gk9
8ouHHt0Y2PEiSlGK4h8Ejrc+HD/i2vWXReXbSHwZ3wR6CNWZGV1XaBMgt50LeBBB
AtW8nCo+r5s5YyxtZFPSkbOPAHI76aJ55hlnilcmjQIDAQABo2kwZzAdBgNVHQ4E
FgQUe4xeyDPtoJRshXhBeZKd7H0tvlYwHwYDVR0jBBgwFoAUe4xeyDPtoJRshXhB
eZKd7H0tvlYwDwYDVR0TAQH/BAUwAwEB/zAUBgNVHREEDTALgglsb2NhbGhvc3Qw
DQYJKoZIhvcNAQELBQADggEBAKfb+z7TdeH/kUGNIqUC2CSOA3EFgXNMzRaoMmvL
NaosOOM2hafG6+uoklq09OzHOEBwCLRVn6p5xCw4tx8HuVR6ZTsZda+gJ2mdIIwh
szxcYZ0+4JDROvGaftbmgkcGXWqR/H0QD0FWgw1ATOHOUDlLXZrhU2FtdMlxLzyu
eaZqzvyFki3JCH7DqWXzly0r40OGHrkOK+VtR61txIDAg0QpkN3tT5LmaS4Yr6u7
8js0bd1AJVDaIbRuKJK5a3qnYITiki44W5pdP9svX9EJze0RYJhZDqb9I9LBRyYA
THjWKTupPB8zQ4cSY1UokqfhGV5pZgHoKMaehz7TO08YtZ4=
-----END CERTIFICATE-----\n";

    #[test]
    fn weak_keys_and_signatures_are_told_apart() {
        let weak_of = |pem: &str| weak(&certs(pem.as_bytes(), "test").unwrap()[0]);
        assert!(weak_of(RSA_1024_SHA1));
        assert!(weak_of(RSA_2048_SHA1));
        assert!(!weak_of(EC_SHA256));
        assert!(!weak_of(RSA_2048_SHA256));
    }

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
    fn asn1_times() {
        assert_eq!(asn1_time(0x17, b"700101000000Z"), Some(0));
        assert_eq!(asn1_time(0x18, b"20380119031408Z"), Some(2_147_483_648));
        // UTCTime's two-digit years: 50 and later are the 1900s.
        assert_eq!(asn1_time(0x17, b"491231235959Z"), Some(2_524_607_999));
        assert_eq!(asn1_time(0x17, b"500101000000Z"), Some(-631_152_000));
        assert_eq!(asn1_time(0x17, b"000229120000Z"), Some(951_825_600));
        assert_eq!(asn1_time(0x17, b"700101000000+0100"), None);
        assert_eq!(asn1_time(0x18, b"700101000000Z"), None);
    }

    #[test]
    fn what_node_may_decide_otherwise() {
        let dns = ServerName::try_from("localhost").unwrap();
        let ip = ServerName::try_from("127.0.0.1").unwrap();
        let leaf = CertificateDer::from(vec![]);
        let cert = |e: CertificateError| rustls::Error::InvalidCertificate(e);
        let name = |presented: &[&str]| {
            cert(CertificateError::NotValidForNameContext {
                expected: dns.to_owned(),
                presented: presented.iter().map(|p| p.to_string()).collect(),
            })
        };
        // Legacy signatures and keys, and a name only the CN may hold: Node's TLS decides.
        assert!(undecided(
            &cert(CertificateError::BadSignature),
            &leaf,
            &[],
            &dns
        ));
        assert!(undecided(&name(&[]), &leaf, &[], &dns));
        assert!(undecided(
            &name(&["IpAddress(127.0.0.1)"]),
            &leaf,
            &[],
            &dns
        ));
        // Verdicts OpenSSL reaches too.
        assert!(!undecided(
            &name(&["DnsName(\"example.com\")"]),
            &leaf,
            &[],
            &dns
        ));
        assert!(!undecided(&name(&[]), &leaf, &[], &ip));
        assert!(!undecided(
            &cert(CertificateError::UnknownIssuer),
            &leaf,
            &[],
            &dns
        ));
        assert!(!undecided(
            &cert(CertificateError::Expired),
            &leaf,
            &[],
            &dns
        ));
        let webpki =
            |e: webpki::Error| cert(CertificateError::Other(rustls::OtherError(Arc::new(e))));
        assert!(undecided(
            &webpki(webpki::Error::UnsupportedCertVersion),
            &leaf,
            &[],
            &dns
        ));
        // A CA:TRUE leaf: not self-signed (unparsable here), Node's TLS may trust it.
        assert!(undecided(
            &webpki(webpki::Error::CaUsedAsEndEntity),
            &leaf,
            &[],
            &dns
        ));

        let io = |e: rustls::Error| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
        assert!(needs_node(&io(rustls::Error::AlertReceived(
            rustls::AlertDescription::ProtocolVersion
        ))));
        assert!(needs_node(&io(cert(CertificateError::BadSignature))));
        assert!(!needs_node(&io(rustls::Error::InvalidMessage(
            rustls::InvalidMessage::InvalidContentType
        ))));
        let refused = CertFailure {
            node: None,
            needs_node: false,
            cause: cert(CertificateError::BadSignature),
        };
        assert!(!needs_node(&io(refused.into_rustls())));
        assert!(!needs_node(&std::io::ErrorKind::ConnectionReset.into()));
    }

    #[test]
    fn altnames_as_node_words_them() {
        let leaf = CertificateDer::from(vec![]);
        let presented = vec![
            "DnsName(\"localhost\")".to_string(),
            "IpAddress(10.0.0.1)".to_string(),
        ];
        let e = |name: &str| {
            let server_name = ServerName::try_from(name.to_owned()).unwrap();
            let cause =
                rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext {
                    expected: server_name.clone(),
                    presented: presented.clone(),
                });
            node_cert_error(&cause, &leaf, &[], &server_name)
                .unwrap()
                .message
        };
        assert_eq!(
            e("example.com"),
            "Hostname/IP does not match certificate's altnames: Host: example.com. is not in the cert's altnames: DNS:localhost, IP Address:10.0.0.1"
        );
        assert_eq!(
            e("127.0.0.1"),
            "Hostname/IP does not match certificate's altnames: IP: 127.0.0.1 is not in the cert's list: 10.0.0.1"
        );
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

    #[test]
    fn a_request_servername_renames_the_config() {
        let opts = TlsOptions {
            server_name: "[::1]".into(),
            reject_unauthorized: true,
            ..Default::default()
        };
        let mut cfg = TlsConfig::new(&opts).unwrap();
        assert!(matches!(cfg.server_name, ServerName::IpAddress(_)));
        cfg.rename(server_name("example.test").unwrap());
        assert_eq!(
            cfg.server_name,
            ServerName::try_from("example.test").unwrap()
        );
        assert!(matches!(
            server_name("not a name"),
            Err(Error::InvalidArgument(_))
        ));
    }
}
