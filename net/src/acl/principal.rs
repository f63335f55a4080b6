//! The principal a connection's requests are authorized as (Kafka's `KafkaPrincipal`, written
//! `Type:name`), from what the connection proved about itself:
//!
//! | connection                                   | principal                          |
//! | -------------------------------------------- | ---------------------------------- |
//! | PLAINTEXT                                    | `User:ANONYMOUS`                   |
//! | SSL without a client certificate             | `User:ANONYMOUS`                   |
//! | SSL with a client certificate                | `User:` + its subject DN (`CN=x,O=y`) |
//! | SASL_PLAINTEXT / SASL_SSL, authenticated     | `User:<name>` (the SCRAM user)     |
//!
//! Kafka's default `DefaultKafkaPrincipalBuilder` gives the same (`ssl.principal.mapping.rules`
//! DEFAULT: the DN as `X500Principal.getName()` prints it, RFC 2253). On a SASL listener the
//! user the connection authenticated as comes first, as in Kafka.

use crate::server::ConnectionInfo;

/// The principal of a connection that proved nothing.
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// The principal `connection`'s requests are authorized as (module doc).
pub fn principal_of(connection: &ConnectionInfo) -> String {
    if let Some(user) = &connection.sasl_user {
        return user.principal().to_string();
    }
    match &connection.tls_client_subject {
        Some(subject) => format!("User:{subject}"),
        None => ANONYMOUS.to_string(),
    }
}

/// A certificate's subject DN as Kafka prints it (RFC 2253, `X500Principal.getName()`): the
/// relative distinguished names from the last to the first, separated by `,` (no spaces),
/// multi-valued ones joined by `+`, each attribute as `KEY=value` with RFC 2253's keywords
/// (CN, C, L, ST, O, OU, STREET, DC, UID) or the dotted OID with a `#`-hex DER value, and
/// `, + " \ < > ;` escaped with a backslash (a leading `#` or space and a trailing space too).
/// `None` when the certificate does not parse.
pub fn subject_dn(certificate_der: &[u8]) -> Option<String> {
    use x509_parser::der_parser::asn1_rs::ToDer;
    use x509_parser::prelude::{FromDer, X509Certificate};
    let (_, certificate) = X509Certificate::from_der(certificate_der).ok()?;
    let mut rdns = Vec::new();
    for rdn in certificate.subject().iter() {
        let mut attributes = Vec::new();
        for attribute in rdn.iter() {
            let oid = attribute.attr_type().to_id_string();
            let keyword = match oid.as_str() {
                "2.5.4.3" => Some("CN"),
                "2.5.4.6" => Some("C"),
                "2.5.4.7" => Some("L"),
                "2.5.4.8" => Some("ST"),
                "2.5.4.10" => Some("O"),
                "2.5.4.11" => Some("OU"),
                "2.5.4.9" => Some("STREET"),
                "0.9.2342.19200300.100.1.25" => Some("DC"),
                "0.9.2342.19200300.100.1.1" => Some("UID"),
                _ => None,
            };
            let text = match (keyword, attribute.as_str()) {
                (Some(keyword), Ok(value)) => format!("{keyword}={}", escape_rfc2253(value)),
                _ => {
                    let der = attribute.attr_value().to_der_vec().ok()?;
                    let hex: String = der.iter().map(|b| format!("{b:02x}")).collect();
                    format!("{oid}=#{hex}")
                }
            };
            attributes.push(text);
        }
        rdns.push(attributes.join("+"));
    }
    rdns.reverse();
    Some(rdns.join(","))
}

fn escape_rfc2253(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (index, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (index == 0 && (c == '#' || c == ' '))
            || (index == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
