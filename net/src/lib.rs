//! ringlog-net
pub mod acl;
pub mod client;
pub mod clients;
pub mod config;
pub mod data_dir_lock;
pub mod groups;
pub mod meta_properties;
pub mod metrics;
pub mod node;
pub mod protocol;
pub mod sasl;
pub mod server;
pub mod signals;
pub mod tls;
