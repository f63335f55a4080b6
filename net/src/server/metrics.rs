//! The server's metrics: Kafka's socket-server names where Kafka has one.

use crate::metrics::{Counter, Gauge, MetricsRegistry};

/// Gauges and counters the server keeps up to date. `ServerMetrics::default()` is registered
/// nowhere (tools and tests read the values directly); [`ServerMetrics::register`] exports them.
#[derive(Clone, Default)]
pub struct ServerMetrics {
    /// `kafka.network:type=SocketServer,name=MemoryPoolUsed`: bytes charged to
    /// `queued.max.request.bytes` (frames being read beyond a connection's own read buffer,
    /// and such frames waiting for their handler's answer).
    pub memory_pool_used: Gauge,
    /// `kafka.network:type=SocketServer,name=MemoryPoolAvailable`: the rest of the budget
    /// (+Inf when unbounded).
    pub memory_pool_available: Gauge,
    /// Frames whose reading is paused until memory is released.
    pub frames_waiting_for_memory: Gauge,
    /// `socket-server-metrics` `connection-count`: connections open now.
    pub connection_count: Gauge,
    /// Connections closed at accept because `max.connections` were open.
    pub connections_refused_max_connections: Counter,
    /// Connections closed at accept because `max.connections.per.ip` were open from their
    /// address.
    pub connections_refused_max_connections_per_ip: Counter,
}

impl ServerMetrics {
    /// Registers the server's metrics in `registry`, named as Kafka's JMX exporter names
    /// Kafka's (ringlog's own under `ringlog_server_`).
    pub fn register(registry: &MetricsRegistry) -> ServerMetrics {
        ServerMetrics {
            memory_pool_used: registry.gauge(
                "kafka_network_socketserver_memorypoolused",
                "Request bytes charged to queued.max.request.bytes",
                &[],
            ),
            memory_pool_available: registry.gauge(
                "kafka_network_socketserver_memorypoolavailable",
                "Request bytes left in queued.max.request.bytes",
                &[],
            ),
            frames_waiting_for_memory: registry.gauge(
                "ringlog_server_frames_waiting_for_memory",
                "Connections whose reading is paused until request memory is released",
                &[],
            ),
            connection_count: registry.gauge(
                "kafka_server_socket_server_metrics_connection_count",
                "Connections open now",
                &[],
            ),
            connections_refused_max_connections: registry.counter(
                "ringlog_server_connections_refused_max_connections_total",
                "Connections closed at accept because max.connections were open",
                &[],
            ),
            connections_refused_max_connections_per_ip: registry.counter(
                "ringlog_server_connections_refused_max_connections_per_ip_total",
                "Connections closed at accept because max.connections.per.ip were open from their address",
                &[],
            ),
        }
    }
}

impl std::fmt::Debug for ServerMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerMetrics")
            .field("memory_pool_used", &self.memory_pool_used.get())
            .field("memory_pool_available", &self.memory_pool_available.get())
            .field(
                "frames_waiting_for_memory",
                &self.frames_waiting_for_memory.get(),
            )
            .field("connection_count", &self.connection_count.get())
            .finish_non_exhaustive()
    }
}
