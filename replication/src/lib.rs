//! ringlog-replication
