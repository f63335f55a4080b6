//! ringlog-net
