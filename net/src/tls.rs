//! TLS for the listeners and for the peer connections, with rustls (ring as the crypto
//! provider: no C toolchain beyond what `ring` builds, no OpenSSL).
//!
//! Kafka's `ssl.*` keys, PEM only:
//!
//! | key | what it gives |
//! | --- | --- |
//! | `ssl.keystore.location` | a PEM file with this node's private key (PKCS#8, PKCS#1 or SEC1) and certificate chain |
//! | `ssl.keystore.certificate.chain`, `ssl.keystore.key` | the same as PEM text in the properties file (instead of the file) |
//! | `ssl.truststore.location` / `ssl.truststore.certificates` | the CA certificates peers' (and, with `ssl.client.auth`, clients') certificates must chain to |
//! | `ssl.client.auth` | `none`, `requested` or `required`: whether a listener asks for client certificates |
//! | `ssl.endpoint.identification.algorithm` | `https` (default): a peer's certificate must name the host of its `controller.quorum.voters` entry; empty: only its chain is checked |
//!
//! A node connecting to its peers' controller listener over TLS presents its keystore
//! certificate as its client certificate, so a listener with `ssl.client.auth=required`
//! admits only holders of a certificate the truststore's CA signed.
//!
//! JKS and PKCS12 keystores and encrypted private keys (`ssl.key.password`) are not supported:
//! a configuration asking for them is refused at start with the key's name.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

/// `ssl.client.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

impl ClientAuth {
    pub(crate) fn parse(text: &str) -> Result<ClientAuth, String> {
        match text {
            "none" => Ok(ClientAuth::None),
            "requested" => Ok(ClientAuth::Requested),
            "required" => Ok(ClientAuth::Required),
            other => Err(format!("{other:?} is not none, requested or required")),
        }
    }
}

/// Where PEM material comes from: a file, or text in the properties file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PemSource {
    File(PathBuf),
    Text(String),
}

impl PemSource {
    fn read(&self) -> Result<Vec<u8>, TlsError> {
        match self {
            PemSource::File(path) => std::fs::read(path).map_err(|error| TlsError::Read {
                path: path.display().to_string(),
                reason: error.to_string(),
            }),
            PemSource::Text(text) => Ok(normalize_pem(text).into_bytes()),
        }
    }

    fn describe(&self) -> String {
        match self {
            PemSource::File(path) => path.display().to_string(),
            PemSource::Text(_) => "the properties file".into(),
        }
    }
}

/// The node's TLS settings, from the `ssl.*` keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// The certificate chain (a keystore file holds key and chain in one).
    pub certificate_chain: Option<PemSource>,
    pub private_key: Option<PemSource>,
    /// CA certificates.
    pub truststore: Option<PemSource>,
    pub client_auth: ClientAuth,
    /// `ssl.endpoint.identification.algorithm=https`: check the peer's name in its certificate.
    pub endpoint_identification: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {reason}")]
    Read { path: String, reason: String },
    #[error("{source_name}: no certificate found")]
    NoCertificate { source_name: String },
    #[error("{source_name}: no private key found ({reason})")]
    NoKey { source_name: String, reason: String },
    #[error("{source_name}: {reason}")]
    BadCertificate { source_name: String, reason: String },
    #[error(
        "no ssl.keystore.location (or ssl.keystore.certificate.chain and ssl.keystore.key): a listener or the peers speak SSL"
    )]
    NoKeystore,
    #[error("no ssl.truststore.location (or ssl.truststore.certificates): {needed_for}")]
    NoTruststore { needed_for: &'static str },
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("client certificate verifier: {0}")]
    Verifier(String),
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl TlsSettings {
    fn certificates(&self) -> Result<Vec<CertificateDer<'static>>, TlsError> {
        let source = self
            .certificate_chain
            .as_ref()
            .ok_or(TlsError::NoKeystore)?;
        let pem = source.read()?;
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<_, _>>()
            .map_err(|error| TlsError::BadCertificate {
                source_name: source.describe(),
                reason: error.to_string(),
            })?;
        if chain.is_empty() {
            return Err(TlsError::NoCertificate {
                source_name: source.describe(),
            });
        }
        Ok(chain)
    }

    fn key(&self) -> Result<PrivateKeyDer<'static>, TlsError> {
        let source = self.private_key.as_ref().ok_or(TlsError::NoKeystore)?;
        let pem = source.read()?;
        PrivateKeyDer::from_pem_slice(&pem).map_err(|error| TlsError::NoKey {
            source_name: source.describe(),
            reason: error.to_string(),
        })
    }

    fn roots(&self, needed_for: &'static str) -> Result<rustls::RootCertStore, TlsError> {
        let source = self
            .truststore
            .as_ref()
            .ok_or(TlsError::NoTruststore { needed_for })?;
        let pem = source.read()?;
        let mut roots = rustls::RootCertStore::empty();
        for certificate in CertificateDer::pem_slice_iter(&pem) {
            let certificate = certificate.map_err(|error| TlsError::BadCertificate {
                source_name: source.describe(),
                reason: error.to_string(),
            })?;
            roots
                .add(certificate)
                .map_err(|error| TlsError::BadCertificate {
                    source_name: source.describe(),
                    reason: error.to_string(),
                })?;
        }
        if roots.is_empty() {
            return Err(TlsError::NoCertificate {
                source_name: source.describe(),
            });
        }
        Ok(roots)
    }

    /// The listeners' side: this node's certificate, and client certificates asked for as
    /// `ssl.client.auth` says.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?;
        let builder = match self.client_auth {
            ClientAuth::None => builder.with_no_client_auth(),
            auth => {
                let roots = self.roots("ssl.client.auth asks for client certificates")?;
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider(),
                );
                let verifier = if auth == ClientAuth::Requested {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                let verifier = verifier
                    .build()
                    .map_err(|error| TlsError::Verifier(error.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder.with_single_cert(self.certificates()?, self.key()?)?;
        Ok(Arc::new(config))
    }

    /// The peers' side: the truststore's CAs, this node's certificate as client certificate.
    pub fn client_config(&self) -> Result<Arc<rustls::ClientConfig>, TlsError> {
        let roots = Arc::new(self.roots("peers connect to an SSL controller listener")?);
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?;
        let builder = if self.endpoint_identification {
            builder.with_root_certificates(roots)
        } else {
            let inner =
                rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider())
                    .build()
                    .map_err(|error| TlsError::Verifier(error.to_string()))?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(ChainOnlyVerifier { inner }))
        };
        let config = builder.with_client_auth_cert(self.certificates()?, self.key()?)?;
        Ok(Arc::new(config))
    }
}

/// `ssl.endpoint.identification.algorithm=` (empty): the peer's certificate must chain to the
/// truststore and be valid, but need not name the host (Kafka's setting for certificates
/// without the right subject alternative names).
#[derive(Debug)]
struct ChainOnlyVerifier {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
}

impl rustls::client::danger::ServerCertVerifier for ChainOnlyVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(rustls::client::danger::ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// The name a peer's certificate must carry: the host of its `controller.quorum.voters`
/// address (an IP address becomes an IP name).
pub fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.to_string()).map_err(|error| format!("{host:?}: {error}"))
}

/// PEM text as a properties value may hold it: on one line, or joined from continuation lines
/// (Kafka's examples), with the base64 body's line breaks gone. Rebuilds each
/// `-----BEGIN …-----` … `-----END …-----` block with the body on lines of its own.
///
/// ```text
/// -----BEGIN CERTIFICATE----- MIIB... MIIC... -----END CERTIFICATE-----
/// ```
pub(crate) fn normalize_pem(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(begin) = rest.find("-----BEGIN ") {
        let after_begin = &rest[begin + "-----BEGIN ".len()..];
        let Some(label_end) = after_begin.find("-----") else {
            break;
        };
        let label = &after_begin[..label_end];
        let body_and_rest = &after_begin[label_end + 5..];
        let end_marker = format!("-----END {label}-----");
        let Some(body_end) = body_and_rest.find(&end_marker) else {
            break;
        };
        let body: String = body_and_rest[..body_end]
            .chars()
            .filter(|c| !c.is_whitespace() && *c != '\\')
            .collect();
        out.push_str(&format!("-----BEGIN {label}-----\n"));
        for line in body.as_bytes().chunks(64) {
            out.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
            out.push('\n');
        }
        out.push_str(&end_marker);
        out.push('\n');
        rest = &body_and_rest[body_end + end_marker.len()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_on_one_line_is_rebuilt() {
        let one_line = "-----BEGIN CERTIFICATE----- QUJD REVG \\ R0g= -----END CERTIFICATE-----";
        assert_eq!(
            normalize_pem(one_line),
            "-----BEGIN CERTIFICATE-----\nQUJDREVGR0g=\n-----END CERTIFICATE-----\n"
        );
    }

    /// A CA and a certificate it signed for `names`, as PEM (CA, key + chain).
    fn certificates(names: &[&str]) -> (String, String) {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let leaf = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
        (ca.pem(), format!("{}{}", key.serialize_pem(), leaf.pem()))
    }

    fn settings(ca: &str, keystore: &str, endpoint_identification: bool) -> TlsSettings {
        TlsSettings {
            certificate_chain: Some(PemSource::Text(keystore.into())),
            private_key: Some(PemSource::Text(keystore.into())),
            truststore: Some(PemSource::Text(ca.into())),
            client_auth: ClientAuth::Required,
            endpoint_identification,
        }
    }

    /// Runs a handshake in memory between a peer (client) dialing `host` and a listener.
    fn handshake(client: &TlsSettings, server: &TlsSettings, host: &str) -> Result<(), String> {
        let mut client = rustls::ClientConnection::new(
            client.client_config().map_err(|e| e.to_string())?,
            server_name(host)?,
        )
        .map_err(|e| e.to_string())?;
        let mut server =
            rustls::ServerConnection::new(server.server_config().map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
        for _ in 0..10 {
            let mut wire = Vec::new();
            while client.wants_write() {
                client.write_tls(&mut wire).map_err(|e| e.to_string())?;
            }
            server
                .read_tls(&mut wire.as_slice())
                .map_err(|e| e.to_string())?;
            server.process_new_packets().map_err(|e| e.to_string())?;
            let mut wire = Vec::new();
            while server.wants_write() {
                server.write_tls(&mut wire).map_err(|e| e.to_string())?;
            }
            client
                .read_tls(&mut wire.as_slice())
                .map_err(|e| e.to_string())?;
            client.process_new_packets().map_err(|e| e.to_string())?;
            if !client.is_handshaking() && !server.is_handshaking() {
                return Ok(());
            }
        }
        Err("handshake did not finish".into())
    }

    /// `ssl.endpoint.identification.algorithm`: https checks the peer's name, empty only its
    /// chain; a certificate of another CA fails either way, and so does a peer without a client
    /// certificate the listener's CA signed (`ssl.client.auth=required`).
    #[test]
    fn peers_check_chain_and_name_as_configured() {
        let (ca, keystore) = certificates(&["127.0.0.1"]);
        let checked = settings(&ca, &keystore, true);
        assert_eq!(handshake(&checked, &checked, "127.0.0.1"), Ok(()));
        assert!(handshake(&checked, &checked, "127.0.0.2").is_err());
        let chain_only = settings(&ca, &keystore, false);
        assert_eq!(handshake(&chain_only, &checked, "127.0.0.2"), Ok(()));
        let (other_ca, other_keystore) = certificates(&["127.0.0.1"]);
        let stranger = settings(&other_ca, &other_keystore, false);
        assert!(handshake(&stranger, &checked, "127.0.0.1").is_err());
        // Trusts our CA, but presents a certificate of another: refused by the listener.
        let impostor = settings(&ca, &other_keystore, true);
        assert!(handshake(&impostor, &checked, "127.0.0.1").is_err());
    }

    #[test]
    fn client_auth_takes_kafkas_values() {
        assert_eq!(ClientAuth::parse("required"), Ok(ClientAuth::Required));
        assert_eq!(ClientAuth::parse("requested"), Ok(ClientAuth::Requested));
        assert_eq!(ClientAuth::parse("none"), Ok(ClientAuth::None));
        assert!(ClientAuth::parse("REQUIRED").is_err());
    }
}
