//! The metric values and their Prometheus text rendering.
//!
//! Values are shared (`Arc`, atomics or a small mutex) so the node may update them from any
//! thread while the endpoint renders them.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Kafka's `metrics.sample.window.ms` default.
const SAMPLE_WINDOW: Duration = Duration::from_secs(30);

/// A set of metrics, rendered in registration order.
#[derive(Clone, Default)]
pub struct MetricsRegistry {
    metrics: Arc<Mutex<Vec<Entry>>>,
}

struct Entry {
    name: String,
    help: String,
    labels: String,
    value: Value,
}

enum Value {
    Gauge(Arc<AtomicU64>),
    Counter(Arc<AtomicU64>),
    State {
        states: Vec<String>,
        current: Arc<Mutex<String>>,
    },
    Windowed(Arc<Mutex<Window>>),
    Rate(Arc<Mutex<Window>>),
}

/// A value that goes up and down (stored as f64 bits). A default one is registered nowhere
/// (for a component whose owner exports no metrics, e.g. a server in a test).
#[derive(Clone, Default)]
pub struct Gauge(Arc<AtomicU64>);

impl Gauge {
    pub fn set(&self, value: f64) {
        self.0.store(value.to_bits(), Ordering::Relaxed);
    }

    pub fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }
}

/// A count that only goes up (a default one is registered nowhere).
#[derive(Clone, Default)]
pub struct Counter(Arc<AtomicU64>);

impl Counter {
    pub fn increment(&self, by: u64) {
        self.0.fetch_add(by, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// One of a fixed set of states, rendered as one line per state (1 for the current one).
#[derive(Clone)]
pub struct StateGauge(Arc<Mutex<String>>);

impl StateGauge {
    pub fn set(&self, state: &str) {
        let mut current = self.0.lock().unwrap_or_else(|e| e.into_inner());
        // Set on every turn with the same state, mostly: no new string for that.
        if *current != state {
            current.clear();
            current.push_str(state);
        }
    }
}

/// Average and maximum of recorded values over the last windows (`<name>_avg`, `<name>_max`).
#[derive(Clone)]
pub struct WindowedStat(Arc<Mutex<Window>>);

impl WindowedStat {
    pub fn record(&self, value: f64) {
        self.record_at(value, Instant::now());
    }

    pub fn record_at(&self, value: f64, now: Instant) {
        lock(&self.0).record(value, now);
    }
}

impl Default for WindowedStat {
    /// A stat no registry shows yet: [`MetricsRegistry::windowed_shared`] registers it under
    /// each set of labels that shares it.
    fn default() -> Self {
        WindowedStat(Arc::new(Mutex::new(Window::new(Instant::now()))))
    }
}

/// Sum of recorded amounts per second over the last windows.
#[derive(Clone)]
pub struct Rate(Arc<Mutex<Window>>);

impl Rate {
    pub fn record(&self, amount: f64) {
        self.record_at(amount, Instant::now());
    }

    pub fn record_at(&self, amount: f64, now: Instant) {
        lock(&self.0).record(amount, now);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Two samples of `SAMPLE_WINDOW` each, as Kafka's SampledStat with `metrics.num.samples` = 2.
pub(crate) struct Window {
    created: Instant,
    samples: [Sample; 2],
    current: usize,
}

#[derive(Clone, Copy)]
struct Sample {
    start: Instant,
    count: u64,
    total: f64,
    max: f64,
}

impl Sample {
    fn new(start: Instant) -> Sample {
        Sample {
            start,
            count: 0,
            total: 0.0,
            max: f64::NEG_INFINITY,
        }
    }
}

impl Window {
    fn new(now: Instant) -> Window {
        Window {
            created: now,
            samples: [Sample::new(now); 2],
            current: 0,
        }
    }

    fn record(&mut self, value: f64, now: Instant) {
        if now.saturating_duration_since(self.samples[self.current].start) >= SAMPLE_WINDOW {
            self.current = 1 - self.current;
            self.samples[self.current] = Sample::new(now);
        }
        let sample = &mut self.samples[self.current];
        sample.count += 1;
        sample.total += value;
        sample.max = sample.max.max(value);
    }

    /// Samples that still cover part of the last two windows.
    fn live(&self, now: Instant) -> impl Iterator<Item = &Sample> {
        self.samples.iter().filter(move |sample| {
            sample.count > 0 && now.saturating_duration_since(sample.start) < 2 * SAMPLE_WINDOW
        })
    }

    fn average(&self, now: Instant) -> f64 {
        let (count, total) = self
            .live(now)
            .fold((0u64, 0.0), |(c, t), s| (c + s.count, t + s.total));
        if count == 0 {
            f64::NAN
        } else {
            total / count as f64
        }
    }

    fn max(&self, now: Instant) -> f64 {
        self.live(now)
            .map(|sample| sample.max)
            .fold(f64::NAN, f64::max)
    }

    fn rate(&self, now: Instant) -> f64 {
        let total: f64 = self.live(now).map(|sample| sample.total).sum();
        let oldest = self
            .live(now)
            .map(|sample| sample.start)
            .min()
            .unwrap_or(now)
            .max(self.created);
        // As Kafka's Rate: never divide by less than one window, so a burst right after
        // start-up does not read as a huge rate.
        let elapsed = now.saturating_duration_since(oldest).max(SAMPLE_WINDOW);
        total / elapsed.as_secs_f64()
    }
}

impl MetricsRegistry {
    pub fn new() -> MetricsRegistry {
        MetricsRegistry::default()
    }

    pub fn gauge(&self, name: &str, help: &str, labels: &[(&str, &str)]) -> Gauge {
        let value = Arc::new(AtomicU64::new(0f64.to_bits()));
        self.register(name, help, labels, Value::Gauge(value.clone()));
        Gauge(value)
    }

    pub fn counter(&self, name: &str, help: &str, labels: &[(&str, &str)]) -> Counter {
        let value = Arc::new(AtomicU64::new(0));
        self.register(name, help, labels, Value::Counter(value.clone()));
        Counter(value)
    }

    pub fn state_gauge(
        &self,
        name: &str,
        help: &str,
        labels: &[(&str, &str)],
        states: &[&str],
    ) -> StateGauge {
        let current = Arc::new(Mutex::new(String::new()));
        self.register(
            name,
            help,
            labels,
            Value::State {
                states: states.iter().map(|s| s.to_string()).collect(),
                current: current.clone(),
            },
        );
        StateGauge(current)
    }

    pub fn windowed(&self, name: &str, help: &str, labels: &[(&str, &str)]) -> WindowedStat {
        let window = Arc::new(Mutex::new(Window::new(Instant::now())));
        self.register(name, help, labels, Value::Windowed(window.clone()));
        WindowedStat(window)
    }

    /// Registers `stat`, which other label sets may show too: one recording is then one update
    /// for all of them (the node's one event loop, shown in every partition's group).
    pub fn windowed_shared(
        &self,
        name: &str,
        help: &str,
        labels: &[(&str, &str)],
        stat: &WindowedStat,
    ) -> WindowedStat {
        self.register(name, help, labels, Value::Windowed(stat.0.clone()));
        stat.clone()
    }

    pub fn rate(&self, name: &str, help: &str, labels: &[(&str, &str)]) -> Rate {
        let window = Arc::new(Mutex::new(Window::new(Instant::now())));
        self.register(name, help, labels, Value::Rate(window.clone()));
        Rate(window)
    }

    fn register(&self, name: &str, help: &str, labels: &[(&str, &str)], value: Value) {
        debug_assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "not a Prometheus metric name: {name}"
        );
        let labels = labels
            .iter()
            .map(|(key, value)| format!("{key}=\"{}\"", escape_label(value)))
            .collect::<Vec<_>>()
            .join(",");
        lock(&self.metrics).push(Entry {
            name: name.to_string(),
            help: help.to_string(),
            labels,
            value,
        });
    }

    /// Drops every metric registered with exactly `labels` (a partition's group when the
    /// partition leaves the node, so a scrape no longer shows its last values).
    pub fn unregister(&self, labels: &[(&str, &str)]) {
        let labels = labels
            .iter()
            .map(|(key, value)| format!("{key}=\"{}\"", escape_label(value)))
            .collect::<Vec<_>>()
            .join(",");
        lock(&self.metrics).retain(|entry| entry.labels != labels);
    }

    /// The Prometheus text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        let now = Instant::now();
        let mut out = String::new();
        for entry in lock(&self.metrics).iter() {
            let line = |out: &mut String, name: &str, extra: &str, value: f64| {
                let labels = match (entry.labels.is_empty(), extra.is_empty()) {
                    (true, true) => String::new(),
                    (false, true) => format!("{{{}}}", entry.labels),
                    (true, false) => format!("{{{extra}}}"),
                    (false, false) => format!("{{{},{extra}}}", entry.labels),
                };
                let _ = writeln!(out, "{name}{labels} {}", number(value));
            };
            let header = |out: &mut String, name: &str, kind: &str| {
                let _ = writeln!(out, "# HELP {name} {}", entry.help);
                let _ = writeln!(out, "# TYPE {name} {kind}");
            };
            match &entry.value {
                Value::Gauge(value) => {
                    header(&mut out, &entry.name, "gauge");
                    line(
                        &mut out,
                        &entry.name,
                        "",
                        f64::from_bits(value.load(Ordering::Relaxed)),
                    );
                }
                Value::Counter(value) => {
                    header(&mut out, &entry.name, "counter");
                    line(
                        &mut out,
                        &entry.name,
                        "",
                        value.load(Ordering::Relaxed) as f64,
                    );
                }
                Value::State { states, current } => {
                    header(&mut out, &entry.name, "gauge");
                    let current = lock(current).clone();
                    for state in states {
                        let value = if *state == current { 1.0 } else { 0.0 };
                        line(&mut out, &entry.name, &format!("state=\"{state}\""), value);
                    }
                }
                Value::Windowed(window) => {
                    let window = lock(window);
                    for (suffix, value) in [("avg", window.average(now)), ("max", window.max(now))]
                    {
                        let name = format!("{}_{suffix}", entry.name);
                        header(&mut out, &name, "gauge");
                        line(&mut out, &name, "", value);
                    }
                }
                Value::Rate(window) => {
                    header(&mut out, &entry.name, "gauge");
                    line(&mut out, &entry.name, "", lock(window).rate(now));
                }
            }
        }
        out
    }
}

fn number(value: f64) -> String {
    if value.is_nan() {
        "NaN".into()
    } else if value == f64::INFINITY {
        "+Inf".into()
    } else if value == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{value}")
    }
}

fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windowed_average_and_max_forget_old_windows() {
        let start = Instant::now();
        let mut window = Window::new(start);
        window.record(10.0, start);
        window.record(30.0, start + Duration::from_secs(1));
        assert_eq!(window.average(start + Duration::from_secs(2)), 20.0);
        assert_eq!(window.max(start + Duration::from_secs(2)), 30.0);
        // Two windows later neither sample counts any more.
        let later = start + 2 * SAMPLE_WINDOW + Duration::from_secs(1);
        assert!(window.average(later).is_nan());
        window.record(5.0, later);
        assert_eq!(window.max(later), 5.0);
    }

    #[test]
    fn rate_divides_by_at_least_one_window() {
        let start = Instant::now();
        let mut window = Window::new(start);
        window.record(300.0, start);
        assert_eq!(window.rate(start + Duration::from_secs(1)), 10.0);
        assert_eq!(window.rate(start + Duration::from_secs(60)), 0.0);
    }
}
