//! Connection limits at accept: Kafka's `max.connections.per.ip` and `max.connections`.
//!
//! A connection over either limit is closed as soon as it is accepted, before anything is read
//! from it. The per-address limit is checked first (as Kafka does), so one busy host is told
//! about its own limit rather than the node's.
//!
//! Kafka closes a connection over `max.connections.per.ip` the same way, but for the
//! node-wide `max.connections` its acceptor stops accepting until a slot frees (KIP-402). We
//! close there too: a connection left in the kernel's accept backlog looks established to
//! the client, which then waits for its request timeout, while a closed one makes it back off
//! and retry at once; and an accept loop that keeps running can count what it refused.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::IpAddr;
use std::rc::Rc;

use super::metrics::ServerMetrics;

/// Which limit a connection was refused by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    MaxConnectionsPerIp,
    MaxConnections,
}

impl Refusal {
    pub(crate) fn key(self) -> &'static str {
        match self {
            Refusal::MaxConnectionsPerIp => "max.connections.per.ip",
            Refusal::MaxConnections => "max.connections",
        }
    }
}

pub(crate) struct ConnectionLimits {
    max_connections: usize,
    max_connections_per_ip: usize,
    state: RefCell<LimitState>,
    metrics: ServerMetrics,
}

#[derive(Default)]
struct LimitState {
    open: usize,
    open_per_ip: HashMap<IpAddr, usize>,
}

impl ConnectionLimits {
    pub(crate) fn new(
        max_connections: usize,
        max_connections_per_ip: usize,
        metrics: ServerMetrics,
    ) -> Rc<ConnectionLimits> {
        metrics.connection_count.set(0.0);
        Rc::new(ConnectionLimits {
            max_connections,
            max_connections_per_ip,
            state: RefCell::new(LimitState::default()),
            metrics,
        })
    }

    /// Counts a connection from `ip` if both limits allow it; the slot gives it back on drop.
    pub(crate) fn admit(self: &Rc<Self>, ip: IpAddr) -> Result<ConnectionSlot, Refusal> {
        // An IPv4 client of a dual-stack listener arrives as ::ffff:a.b.c.d: one host, one count.
        let ip = ip.to_canonical();
        let mut state = self.state.borrow_mut();
        let from_ip = state.open_per_ip.get(&ip).copied().unwrap_or(0);
        let refusal = if from_ip >= self.max_connections_per_ip {
            Some(Refusal::MaxConnectionsPerIp)
        } else if state.open >= self.max_connections {
            Some(Refusal::MaxConnections)
        } else {
            None
        };
        if let Some(refusal) = refusal {
            let counter = match refusal {
                Refusal::MaxConnectionsPerIp => {
                    &self.metrics.connections_refused_max_connections_per_ip
                }
                Refusal::MaxConnections => &self.metrics.connections_refused_max_connections,
            };
            counter.increment(1);
            return Err(refusal);
        }
        state.open += 1;
        *state.open_per_ip.entry(ip).or_insert(0) += 1;
        self.metrics.connection_count.set(state.open as f64);
        Ok(ConnectionSlot {
            limits: self.clone(),
            ip,
        })
    }

    /// How many connections this limit has refused so far (for the log).
    pub(crate) fn refused_total(&self, refusal: Refusal) -> u64 {
        match refusal {
            Refusal::MaxConnectionsPerIp => self
                .metrics
                .connections_refused_max_connections_per_ip
                .get(),
            Refusal::MaxConnections => self.metrics.connections_refused_max_connections.get(),
        }
    }

    pub(crate) fn limit(&self, refusal: Refusal) -> usize {
        match refusal {
            Refusal::MaxConnectionsPerIp => self.max_connections_per_ip,
            Refusal::MaxConnections => self.max_connections,
        }
    }
}

/// One admitted connection's place in the counts.
pub(crate) struct ConnectionSlot {
    limits: Rc<ConnectionLimits>,
    ip: IpAddr,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut state = self.limits.state.borrow_mut();
        state.open -= 1;
        let from_ip = state
            .open_per_ip
            .get_mut(&self.ip)
            .expect("an admitted address is counted");
        *from_ip -= 1;
        if *from_ip == 0 {
            state.open_per_ip.remove(&self.ip);
        }
        self.limits.metrics.connection_count.set(state.open as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn the_per_ip_limit_is_checked_first_and_slots_come_back() {
        let metrics = ServerMetrics::default();
        let limits = ConnectionLimits::new(3, 2, metrics.clone());
        let a1 = limits.admit(ip("127.0.0.1")).unwrap();
        let _a2 = limits.admit(ip("127.0.0.1")).unwrap();
        assert_eq!(
            limits.admit(ip("127.0.0.1")).err(),
            Some(Refusal::MaxConnectionsPerIp)
        );
        // The same host over IPv4-mapped IPv6 is the same address.
        assert_eq!(
            limits.admit(ip("::ffff:127.0.0.1")).err(),
            Some(Refusal::MaxConnectionsPerIp)
        );
        let _b1 = limits.admit(ip("127.0.0.2")).unwrap();
        assert_eq!(
            limits.admit(ip("127.0.0.3")).err(),
            Some(Refusal::MaxConnections)
        );
        assert_eq!(metrics.connection_count.get(), 3.0);
        assert_eq!(limits.refused_total(Refusal::MaxConnectionsPerIp), 2);
        assert_eq!(limits.refused_total(Refusal::MaxConnections), 1);
        drop(a1);
        assert_eq!(metrics.connection_count.get(), 2.0);
        let _a3 = limits.admit(ip("127.0.0.1")).unwrap();
        assert_eq!(limits.limit(Refusal::MaxConnections), 3);
    }
}
