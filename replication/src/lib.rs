//! ringlog-replication
pub mod fair_share;
