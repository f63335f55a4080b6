//! ringlog-net
pub mod config;
