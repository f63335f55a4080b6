//! ringlog-net
pub mod config;
pub mod meta_properties;
pub mod metrics;
pub mod node;
pub mod protocol;
pub mod peer;
pub mod server;
