//! When the event loop polls for its next event before it sleeps (`idle.poll.us`): only after
//! a turn that handled something, and only while records flow through the node, slowly.
//!
//! The poll pays where a commit waits on a few messages and a small flush in turn, each of
//! which would otherwise wake a halted CPU (one record at a time: p50 0.60 → 0.46 ms on the
//! 2-core test machine, docs/benchmarks.md "Polling before sleeping"). Under a heavy load the
//! loop has work queued anyway, and polling there doubled the p99 at half the saturating rate
//! in half the runs for a reason not found. So the node counts the bytes it appends (as leader
//! and as follower) and polls only while the last full window and the current one each stayed
//! under `LIGHT_BYTES_PER_WINDOW`: one client writing one 1 KiB record at a time appends about
//! 2 MB/s, half the saturating rate 75-110 MB/s. And only while something was appended in one
//! of them: with no records flowing there is no commit to hurry, and a node that polls through
//! an election or a peer's restart takes CPU from the replicas doing that work (a 20-partition
//! fault run lost a second more to the election after each kill while the nodes polled through
//! it, 2026-12-06).

/// The length of one counting window.
const WINDOW_MS: u64 = 16;

/// Light: under 128 KiB appended per 16 ms window (8 MiB/s).
const LIGHT_BYTES_PER_WINDOW: u64 = 128 * 1024;

/// Bytes appended per window, the current one and the one before.
#[derive(Debug, Default)]
pub(super) struct AppendLoad {
    window_start_ms: u64,
    this_window: u64,
    last_window: u64,
    /// Appended since the last look, counted into the window of that look (the turn that
    /// appended them ended then).
    unseen: u64,
}

impl AppendLoad {
    /// Counts `bytes` appended to any partition's log.
    pub(super) fn record(&mut self, bytes: usize) {
        self.unseen = self.unseen.saturating_add(bytes as u64);
    }

    /// Whether records flow, slowly, at `now_ms`: something appended in the last full window or
    /// the current one, and each under the limit. A gap of more than a window counts as an empty
    /// window.
    pub(super) fn light(&mut self, now_ms: u64) -> bool {
        let elapsed = now_ms.saturating_sub(self.window_start_ms);
        if elapsed >= WINDOW_MS {
            self.last_window = if elapsed < 2 * WINDOW_MS {
                self.this_window
            } else {
                0
            };
            self.this_window = 0;
            self.window_start_ms = now_ms;
        }
        self.this_window = self
            .this_window
            .saturating_add(std::mem::take(&mut self.unseen));
        let flowing = self.last_window > 0 || self.this_window > 0;
        flowing
            && self.last_window < LIGHT_BYTES_PER_WINDOW
            && self.this_window < LIGHT_BYTES_PER_WINDOW
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `bytes_per_ms` appended every millisecond from `from_ms` to `to_ms`, the loop asking
    /// after each; whether the last answer was light.
    fn run(load: &mut AppendLoad, from_ms: u64, to_ms: u64, bytes_per_ms: usize) -> bool {
        let mut light = true;
        for ms in from_ms..to_ms {
            load.record(bytes_per_ms);
            light = load.light(ms);
        }
        light
    }

    #[test]
    fn light_at_one_record_at_a_time_heavy_at_half_the_rate_not_light_when_nothing_flows() {
        let mut load = AppendLoad::default();
        assert!(!load.light(0), "nothing appended yet");
        // One 1 KiB record every half millisecond.
        for ms in 1..100 {
            load.record(1024);
            load.record(1024);
            assert!(load.light(ms), "2 MB/s is light (at {ms} ms)");
        }
        // Half the saturating rate: a 64 KiB batch every millisecond. The window under way
        // reaches the limit in its second millisecond at the latest.
        assert!(!run(&mut load, 100, 103, 64 * 1024));
        assert!(!run(&mut load, 103, 140, 64 * 1024));
        // It stops: the current window is empty at once, the last full one heavy until a
        // window has passed, and then nothing flows.
        assert!(!load.light(141));
        assert!(!load.light(180), "two windows without an append");
        // Just under the limit is light: 7 KiB per millisecond, 112 KiB per window.
        assert!(run(&mut load, 180, 260, 7 * 1024));
        // One record after a pause is light at once.
        load.record(1024);
        assert!(load.light(400));
        // A long pause after a heavy burst forgets the burst.
        load.record(1 << 20);
        assert!(!load.light(401));
        assert!(!load.light(1_000));
        load.record(1024);
        assert!(load.light(1_001));
    }
}
