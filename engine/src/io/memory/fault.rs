//! Seeded randomness and the fault configuration of the memory backend.

use std::path::{Path, PathBuf};

/// A small deterministic PRNG (xoshiro256**, seeded through splitmix64). One seed replays one
/// history bit for bit; there is no global randomness anywhere in the backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimRng {
    state: [u64; 4],
}

impl SimRng {
    pub fn new(seed: u64) -> Self {
        let mut sm = seed;
        let mut next = || {
            // splitmix64: spreads a low-entropy seed (0, 1, 2, ...) over the whole state.
            sm = sm.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = sm;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        SimRng {
            state: [next(), next(), next(), next()],
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.state;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `0..bound` (`bound > 0`), without modulo bias worth caring about in tests.
    pub fn below(&mut self, bound: u64) -> u64 {
        assert!(bound > 0, "SimRng::below(0)");
        ((self.next_u64() as u128 * bound as u128) >> 64) as u64
    }

    /// True with probability `p` (clamped to 0..=1). `p == 0` consumes no randomness, so enabling
    /// one fault kind does not change the outcome of the others' draws when they are off.
    pub fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        if p >= 1.0 {
            return true;
        }
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 > 1.0 - p
    }

    /// A seed for a child generator, so one master seed can drive several components.
    pub fn fork(&mut self) -> SimRng {
        SimRng::new(self.next_u64())
    }
}

/// Probabilities of faults drawn from the backend's seeded PRNG. All zero (the default) means a
/// perfect disk; crashes still drop whatever was not made durable.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultConfig {
    /// At a crash, per file: the last write not covered by a completed fdatasync lands as a prefix
    /// cut at a random byte (a write in flight at power loss).
    pub tear_probability: f64,
    /// At a crash, every write not covered by a completed fdatasync may be torn (with
    /// `tear_probability`), not only each file's newest: several writes in flight on one file
    /// before one fdatasync (a log flush's blocks, slot and confirmation record) can each land
    /// in part.
    pub tear_every_unsynced_write: bool,
    /// At a crash, per earlier unsynced write: it reached the medium in full anyway (writeback ran).
    /// Keeps recovery honest: unsynced bytes *may* survive, they are just not promised.
    pub writeback_probability: f64,
    /// Per read: fail with EIO.
    pub read_eio_probability: f64,
    /// Per write: fail with EIO, nothing written.
    pub write_eio_probability: f64,
    /// Per write: fail with ENOSPC, nothing written.
    pub write_enospc_probability: f64,
    /// Per fdatasync: fail with EIO, nothing made durable.
    pub fsync_eio_probability: f64,
    /// Run independent submissions (single ops or whole linked chains) in a shuffled order.
    pub reorder_completions: bool,
    /// Per independent submission, once `submit_and_wait`'s minimum is met: leave it pending until a
    /// later call, so a caller that reads results it never waited for sees nothing.
    pub delay_probability: f64,
}

/// Which failure a [`FaultTrigger`] produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    ReadEio,
    WriteEio,
    WriteEnospc,
    FsyncEio,
}

impl FaultKind {
    pub(crate) fn errno(self) -> i32 {
        match self {
            FaultKind::ReadEio | FaultKind::WriteEio | FaultKind::FsyncEio => libc::EIO,
            FaultKind::WriteEnospc => libc::ENOSPC,
        }
    }
}

/// A targeted fault: fires on the next matching operations, `times` of them (`None`: forever,
/// e.g. a bad sector that fails every read covering it).
#[derive(Clone, Debug, PartialEq)]
pub struct FaultTrigger {
    pub kind: FaultKind,
    /// Only operations on this path (as opened); `None`: any file.
    pub path: Option<PathBuf>,
    /// Only reads/writes whose byte range covers this offset; `None`: any offset.
    pub offset: Option<u64>,
    pub times: Option<u32>,
}

impl FaultTrigger {
    /// Fire once, on the next operation of `kind` anywhere.
    pub fn once(kind: FaultKind) -> Self {
        FaultTrigger {
            kind,
            path: None,
            offset: None,
            times: Some(1),
        }
    }

    /// Fire on every operation of `kind` anywhere until cleared (`MemoryIo::clear_faults`):
    /// with `WriteEnospc`, a full disk (writes and reservations fail) until space returns.
    pub fn always(kind: FaultKind) -> Self {
        FaultTrigger {
            kind,
            path: None,
            offset: None,
            times: None,
        }
    }

    /// Fire once, on the next operation of `kind` on `path`.
    pub fn once_at(kind: FaultKind, path: impl Into<PathBuf>) -> Self {
        FaultTrigger {
            kind,
            path: Some(path.into()),
            offset: None,
            times: Some(1),
        }
    }

    /// Fire on every operation of `kind` on `path` covering byte `offset`.
    pub fn always_at(kind: FaultKind, path: impl Into<PathBuf>, offset: u64) -> Self {
        FaultTrigger {
            kind,
            path: Some(path.into()),
            offset: Some(offset),
            times: None,
        }
    }

    pub(crate) fn matches(
        &self,
        kind: FaultKind,
        path: &Path,
        offset: u64,
        len_bytes: usize,
    ) -> bool {
        if self.kind != kind || self.times == Some(0) {
            return false;
        }
        if let Some(p) = &self.path
            && p != path
        {
            return false;
        }
        match self.offset {
            None => true,
            Some(at) => at >= offset && at < offset.saturating_add(len_bytes.max(1) as u64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        let a: Vec<u64> = (0..8)
            .map({
                let mut r = SimRng::new(7);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..8)
            .map({
                let mut r = SimRng::new(7);
                move |_| r.next_u64()
            })
            .collect();
        let c: Vec<u64> = (0..8)
            .map({
                let mut r = SimRng::new(8);
                move |_| r.next_u64()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn below_stays_in_range_and_chance_is_roughly_right() {
        let mut rng = SimRng::new(1);
        let mut hits = 0;
        for _ in 0..10_000 {
            assert!(rng.below(13) < 13);
            if rng.chance(0.25) {
                hits += 1;
            }
        }
        assert!(
            (2000..3000).contains(&hits),
            "chance(0.25) hit {hits} of 10000"
        );
        assert!(!rng.chance(0.0));
        assert!(rng.chance(1.0));
    }
}
