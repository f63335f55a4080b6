//! SaslHandshake (17), SaslAuthenticate (36), DescribeUserScramCredentials (50) and
//! AlterUserScramCredentials (51): authentication and the SCRAM credentials it checks.
//!
//! Written from Kafka's JSON schemas (`clients/src/main/resources/common/message/`). SaslHandshake
//! v1 is v0 (it only says SaslAuthenticate follows); SaslAuthenticate v1 adds the session
//! lifetime, v2 is flexible.

pub mod sasl_handshake_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct SaslHandshakeRequest {
            /// The SASL mechanism the client chose (`SCRAM-SHA-256`, …).
            mechanism: String { versions: 0.. },
        }
    }
}

pub mod sasl_handshake_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct SaslHandshakeResponse {
            error_code: i16 { versions: 0.. },
            /// The mechanisms enabled on this listener.
            mechanisms: Vec<String> { versions: 0.. },
        }
    }
}

pub mod sasl_authenticate_request {
    use bytes::Bytes;

    use crate::protocol::dsl::message;

    message! {
        pub struct SaslAuthenticateRequest {
            /// One message of the mechanism's exchange (RFC 5802's client-first, client-final).
            auth_bytes: Bytes { versions: 0.. },
        }
    }
}

pub mod sasl_authenticate_response {
    use bytes::Bytes;

    use crate::protocol::dsl::message;

    message! {
        pub struct SaslAuthenticateResponse {
            error_code: i16 { versions: 0.. },
            error_message: Option<String> { versions: 0.., nullable: 0.. },
            /// The server's message of the exchange (server-first, server-final).
            auth_bytes: Bytes { versions: 0.. },
            /// 0: the session does not expire (no re-authentication, KIP-368).
            session_lifetime_ms: i64 { versions: 1.. },
        }
    }
}

pub mod describe_user_scram_credentials_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct DescribeUserScramCredentialsRequest {
            /// Null or empty: every user.
            users: Option<Vec<UserName>> { versions: 0.., nullable: 0.., default: Some(Vec::new()) },
        }
    }

    message! {
        pub struct UserName {
            name: String { versions: 0.. },
        }
    }
}

pub mod describe_user_scram_credentials_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct DescribeUserScramCredentialsResponse {
            throttle_time_ms: i32 { versions: 0.. },
            error_code: i16 { versions: 0.. },
            error_message: Option<String> { versions: 0.., nullable: 0.. },
            results: Vec<DescribeUserScramCredentialsResult> { versions: 0.. },
        }
    }

    message! {
        pub struct DescribeUserScramCredentialsResult {
            user: String { versions: 0.. },
            error_code: i16 { versions: 0.. },
            error_message: Option<String> { versions: 0.., nullable: 0.. },
            credential_infos: Vec<CredentialInfo> { versions: 0.. },
        }
    }

    message! {
        pub struct CredentialInfo {
            /// 1 SCRAM-SHA-256, 2 SCRAM-SHA-512.
            mechanism: i8 { versions: 0.. },
            iterations: i32 { versions: 0.. },
        }
    }
}

pub mod alter_user_scram_credentials_request {
    use bytes::Bytes;

    use crate::protocol::dsl::message;

    message! {
        pub struct AlterUserScramCredentialsRequest {
            deletions: Vec<ScramCredentialDeletion> { versions: 0.. },
            upsertions: Vec<ScramCredentialUpsertion> { versions: 0.. },
        }
    }

    message! {
        pub struct ScramCredentialDeletion {
            name: String { versions: 0.. },
            mechanism: i8 { versions: 0.. },
        }
    }

    message! {
        pub struct ScramCredentialUpsertion {
            name: String { versions: 0.. },
            mechanism: i8 { versions: 0.. },
            iterations: i32 { versions: 0.. },
            /// Chosen by the client.
            salt: Bytes { versions: 0.. },
            /// RFC 5802's SaltedPassword, Hi(password, salt, iterations): the broker derives the
            /// StoredKey and ServerKey from it and keeps neither it nor the password.
            salted_password: Bytes { versions: 0.. },
        }
    }
}

pub mod alter_user_scram_credentials_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct AlterUserScramCredentialsResponse {
            throttle_time_ms: i32 { versions: 0.. },
            results: Vec<AlterUserScramCredentialsResult> { versions: 0.. },
        }
    }

    message! {
        pub struct AlterUserScramCredentialsResult {
            user: String { versions: 0.. },
            error_code: i16 { versions: 0.. },
            error_message: Option<String> { versions: 0.., nullable: 0.. },
        }
    }
}
