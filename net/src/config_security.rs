//! The client listener's security keys: `sasl.enabled.mechanisms` and the `ssl.*` keys of an
//! SSL listener (docs/configuration.md).

use std::path::PathBuf;

use super::ConfigError;
use super::properties::Properties;

/// `sasl.enabled.mechanisms`: SCRAM-SHA-256 and SCRAM-SHA-512, at least one, each once.
pub(super) fn sasl_mechanisms(text: &str) -> Result<Vec<crate::sasl::ScramMechanism>, String> {
    let mut mechanisms = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let mechanism = crate::sasl::ScramMechanism::from_name(name).ok_or_else(|| {
            format!("{name} is not supported (SCRAM-SHA-256 and SCRAM-SHA-512 are)")
        })?;
        if !mechanisms.contains(&mechanism) {
            mechanisms.push(mechanism);
        }
    }
    if mechanisms.is_empty() {
        return Err("name SCRAM-SHA-256 or SCRAM-SHA-512 for the SASL listener".into());
    }
    Ok(mechanisms)
}

/// The `ssl.*` keys of a node with an SSL listener: PEM only, a keystore either as a file or as
/// text, never both.
pub(super) fn tls_settings(values: &Properties) -> Result<crate::tls::TlsSettings, ConfigError> {
    use crate::tls::{ClientAuth, PemSource, TlsSettings};
    for key in ["ssl.keystore.type", "ssl.truststore.type"] {
        if values.get(key) != "PEM" {
            return Err(values.invalid(key, "only PEM is supported".into()));
        }
    }
    if !values.get("ssl.key.password").is_empty() {
        return Err(values.invalid(
            "ssl.key.password",
            "encrypted private keys are not supported; give an unencrypted key".into(),
        ));
    }
    let location = values.get("ssl.keystore.location");
    let chain = values.get("ssl.keystore.certificate.chain");
    let key = values.get("ssl.keystore.key");
    let (certificate_chain, private_key) = match (
        location.is_empty(),
        chain.is_empty(),
        key.is_empty(),
    ) {
        (false, true, true) => (
            PemSource::File(PathBuf::from(location)),
            PemSource::File(PathBuf::from(location)),
        ),
        (true, false, false) => (PemSource::Text(chain.into()), PemSource::Text(key.into())),
        (true, true, true) => {
            return Err(values.invalid(
                "ssl.keystore.location",
                "an SSL listener needs this node's key and certificate (or ssl.keystore.certificate.chain and ssl.keystore.key)".into(),
            ));
        }
        _ => {
            return Err(values.invalid(
                "ssl.keystore.location",
                "give either ssl.keystore.location or both ssl.keystore.certificate.chain and ssl.keystore.key".into(),
            ));
        }
    };
    let truststore = match (
        values.get("ssl.truststore.location"),
        values.get("ssl.truststore.certificates"),
    ) {
        ("", "") => None,
        (location, "") => Some(PemSource::File(PathBuf::from(location))),
        ("", text) => Some(PemSource::Text(text.into())),
        _ => {
            return Err(values.invalid(
                "ssl.truststore.location",
                "give either ssl.truststore.location or ssl.truststore.certificates".into(),
            ));
        }
    };
    let client_auth = ClientAuth::parse(values.get("ssl.client.auth"))
        .map_err(|reason| values.invalid("ssl.client.auth", reason))?;
    let endpoint_identification = match values.get("ssl.endpoint.identification.algorithm") {
        "https" => true,
        "" => false,
        _ => {
            return Err(values.invalid(
                "ssl.endpoint.identification.algorithm",
                "expected https or nothing".into(),
            ));
        }
    };
    Ok(TlsSettings {
        certificate_chain: Some(certificate_chain),
        private_key: Some(private_key),
        truststore,
        client_auth,
        endpoint_identification,
    })
}
