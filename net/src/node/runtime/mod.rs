//! The node's runtime, one concept per file: `Node` itself (its state, start-up and the event
//! loop) is in `node/mod.rs`; the rest of its orchestration is here. Every rule lives in the
//! parts it routes between (the host, `QuorumRpc`, the API types called with a `Cx`); these
//! files hold which part is called when, and what is done with what it returns. No other
//! module of `net/src/node/` has an `impl Node`.

mod delivery;
mod dispatch;
mod faults;
mod partitions;
mod shutdown;
mod waiters;
