//! ringlog-net
pub mod config;
pub mod meta_properties;
pub mod protocol;
