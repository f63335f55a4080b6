//! The node-wide budget for request bytes being read (Kafka's `queued.max.request.bytes`).
//!
//! Every connection reads small frames into its own read buffer ([`FREE_BYTES_PER_CONNECTION`],
//! 64 KiB, bounded in total by `max.connections`); those are never charged, so the small
//! requests that keep the quorum alive (Fetch, Vote, heartbeats) can never wait behind clients'
//! bulk data. A frame that outgrows that buffer is charged here, step by step as its buffer
//! grows (the reader's growth policy is in `frame.rs`), and holds its charge until the handler
//! has answered it. When a step cannot be granted the reader stops reading that connection
//! until bytes are released: TCP pushes back on the client and nothing is allocated.
//!
//! ## Why a grant may be refused while bytes are free (no deadlock)
//!
//! Frames grow in steps, so a budget that only checked "are `step` bytes free" could be shared
//! out among several half-read frames that each wait for the others to finish: with 100 MiB,
//! two clients sending 60 MiB frames could each get 50 MiB and wait forever. A step is therefore
//! granted only if, after it, every frame being read can still be completed one after another
//! (Dijkstra's banker's algorithm for one resource): sort the frames by the bytes each still
//! needs; the first must fit in the free bytes, and each completed frame's bytes come back to
//! the pool (once its handler answers) for the next. Worked example, budget 100:
//!
//! | frames being read (held, still needed) | free | request | after the grant | granted |
//! | --- | --- | --- | --- | --- |
//! | A (10, 50) | 90 | B: 10 of a 60 frame | free 80; A needs 50 ≤ 80, then 80 + 10 ≥ B's 50 | yes |
//! | A (40, 20), B (40, 20) | 20 | C: 10 of a 60 frame | free 10 < 20, the smallest need | no: C waits |
//! | A (1, 99) (a client that announced 100 and stalled) | 99 | D: 10 of a 10 frame | D needs 0, returns 10: 99 ≥ 99 | yes |
//!
//! The last row is why one stalled client cannot block everyone: a frame that can complete
//! first is always admitted. Frames already complete (waiting for their handler) are counted
//! as used, not as coming back, so the check never relies on a handler's timing.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use tokio::sync::Notify;

use super::metrics::ServerMetrics;

/// Bytes of its read buffer a connection may use without a charge: small pipelined requests
/// arrive in it, and it is the read size when no frame is in progress.
pub(crate) const FREE_BYTES_PER_CONNECTION: usize = 64 * 1024;

/// The pool was closed by a stop of the server while a frame waited for memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the server is stopping")]
pub struct PoolClosed;

/// The budget. One per server, shared by its connections on the server's thread.
pub(crate) struct RequestMemoryPool {
    /// `None`: unbounded (Kafka's -1); the bytes are still counted for the metrics.
    capacity_bytes: Option<u64>,
    state: RefCell<PoolState>,
    /// Signalled whenever bytes come back or a frame being read goes away.
    released: Notify,
    closed: Cell<bool>,
    metrics: ServerMetrics,
}

#[derive(Default)]
struct PoolState {
    used_bytes: u64,
    /// Frames being read that hold bytes, by charge id.
    reading: BTreeMap<u64, FrameNeed>,
    next_charge_id: u64,
    waiting: usize,
}

/// One frame being read: bytes held now and bytes it still needs to be complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameNeed {
    pub(crate) held_bytes: u64,
    pub(crate) remaining_bytes: u64,
}

impl RequestMemoryPool {
    pub(crate) fn new(capacity_bytes: Option<u64>, metrics: ServerMetrics) -> Rc<Self> {
        metrics.memory_pool_used.set(0.0);
        metrics.memory_pool_available.set(match capacity_bytes {
            Some(capacity) => capacity as f64,
            None => f64::INFINITY,
        });
        Rc::new(RequestMemoryPool {
            capacity_bytes,
            state: RefCell::new(PoolState::default()),
            released: Notify::new(),
            closed: Cell::new(false),
            metrics,
        })
    }

    /// A charge for a frame that will need `need_bytes` of charged memory in all.
    ///
    /// The caller has checked the frame size against `socket.request.max.bytes`, and
    /// [`super::Server::start`] checked that the budget holds the largest frame, so every
    /// frame fits the budget on its own.
    pub(crate) fn open_charge(self: &Rc<Self>, need_bytes: u64) -> MemoryCharge {
        if let Some(capacity) = self.capacity_bytes {
            assert!(
                need_bytes <= capacity,
                "a frame needing {need_bytes} bytes can never fit a budget of {capacity}"
            );
        }
        let mut state = self.state.borrow_mut();
        let id = state.next_charge_id;
        state.next_charge_id += 1;
        MemoryCharge {
            pool: self.clone(),
            id,
            need_bytes,
            held_bytes: 0,
            reading: true,
        }
    }

    /// Wakes every frame waiting for memory and makes them (and later requests) fail with
    /// [`PoolClosed`]: the server is stopping and reads no new requests.
    pub(crate) fn close(&self) {
        self.closed.set(true);
        self.released.notify_waiters();
    }

    /// Charges `preferred_bytes` more to `charge` if that is safe now, else `minimum_bytes`
    /// (nothing when that is 0), waiting until the minimum is safe; returns what was charged.
    pub(crate) async fn reserve(
        &self,
        charge: &mut MemoryCharge,
        minimum_bytes: u64,
        preferred_bytes: u64,
    ) -> Result<u64, PoolClosed> {
        debug_assert!(std::ptr::eq(&*charge.pool, self));
        assert!(
            minimum_bytes <= preferred_bytes
                && charge.reading
                && charge.held_bytes + preferred_bytes <= charge.need_bytes,
            "a charge grows only while its frame is read, up to its need"
        );
        let mut waiting = false;
        let result = loop {
            // Created before the check, so a release between the check and the wait is seen.
            let released = self.released.notified();
            if self.closed.get() {
                break Err(PoolClosed);
            }
            if self.try_grant(charge, preferred_bytes) {
                break Ok(preferred_bytes);
            }
            if minimum_bytes == 0 {
                break Ok(0);
            }
            if self.try_grant(charge, minimum_bytes) {
                break Ok(minimum_bytes);
            }
            if !waiting {
                waiting = true;
                self.set_waiting(1);
            }
            released.await;
        };
        if waiting {
            self.set_waiting(-1);
        }
        result
    }

    fn try_grant(&self, charge: &mut MemoryCharge, additional_bytes: u64) -> bool {
        let mut state = self.state.borrow_mut();
        if let Some(capacity) = self.capacity_bytes {
            let free_bytes = capacity - state.used_bytes;
            let after = FrameNeed {
                held_bytes: charge.held_bytes + additional_bytes,
                remaining_bytes: charge.need_bytes - charge.held_bytes - additional_bytes,
            };
            let others = state
                .reading
                .iter()
                .filter(|(id, _)| **id != charge.id)
                .map(|(_, need)| *need);
            if additional_bytes > free_bytes
                || !all_frames_can_complete(free_bytes - additional_bytes, others.chain([after]))
            {
                return false;
            }
        }
        charge.held_bytes += additional_bytes;
        state.used_bytes += additional_bytes;
        state.reading.insert(
            charge.id,
            FrameNeed {
                held_bytes: charge.held_bytes,
                remaining_bytes: charge.need_bytes - charge.held_bytes,
            },
        );
        self.publish(&state);
        true
    }

    fn set_waiting(&self, delta: isize) {
        let mut state = self.state.borrow_mut();
        state.waiting = state.waiting.checked_add_signed(delta).expect("waiters");
        self.metrics
            .frames_waiting_for_memory
            .set(state.waiting as f64);
    }

    fn publish(&self, state: &PoolState) {
        self.metrics.memory_pool_used.set(state.used_bytes as f64);
        if let Some(capacity) = self.capacity_bytes {
            self.metrics
                .memory_pool_available
                .set((capacity - state.used_bytes) as f64);
        }
    }

    /// Bytes charged right now (frames being read plus frames waiting for their handler).
    #[cfg(test)]
    pub(crate) fn used_bytes(&self) -> u64 {
        self.state.borrow().used_bytes
    }
}

/// The banker's check: can every frame being read complete, one after another, starting from
/// `free_bytes` and getting each completed frame's held bytes back?
///
/// Sorting by remaining need is enough for a single resource: if the frame needing least does
/// not fit, none does, and completing any frame only adds free bytes.
pub(crate) fn all_frames_can_complete(
    free_bytes: u64,
    frames: impl Iterator<Item = FrameNeed>,
) -> bool {
    let mut frames: Vec<FrameNeed> = frames.collect();
    frames.sort_unstable_by_key(|frame| frame.remaining_bytes);
    let mut available_bytes = free_bytes;
    for frame in frames {
        if frame.remaining_bytes > available_bytes {
            return false;
        }
        available_bytes += frame.held_bytes;
    }
    true
}

/// Bytes charged to one frame. Dropping it gives them back (the handler answered, or the
/// connection closed mid-frame) and wakes the frames waiting for memory.
pub(crate) struct MemoryCharge {
    pool: Rc<RequestMemoryPool>,
    id: u64,
    need_bytes: u64,
    held_bytes: u64,
    /// True until the frame is complete; only frames being read count in the banker's check.
    reading: bool,
}

impl MemoryCharge {
    pub(crate) fn held_bytes(&self) -> u64 {
        self.held_bytes
    }

    /// The frame is complete: its bytes stay charged until the charge is dropped, but it no
    /// longer needs more, so it leaves the frames the banker's check must complete.
    pub(crate) fn complete(&mut self) {
        assert_eq!(
            self.held_bytes, self.need_bytes,
            "a frame completes holding exactly its need"
        );
        if std::mem::replace(&mut self.reading, false) {
            self.pool.state.borrow_mut().reading.remove(&self.id);
        }
    }
}

impl Drop for MemoryCharge {
    fn drop(&mut self) {
        let mut state = self.pool.state.borrow_mut();
        state.reading.remove(&self.id);
        state.used_bytes -= self.held_bytes;
        self.pool.publish(&state);
        drop(state);
        self.pool.released.notify_waiters();
    }
}

impl std::fmt::Debug for MemoryCharge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryCharge")
            .field("id", &self.id)
            .field("need_bytes", &self.need_bytes)
            .field("held_bytes", &self.held_bytes)
            .field("reading", &self.reading)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn need(held_bytes: u64, remaining_bytes: u64) -> FrameNeed {
        FrameNeed {
            held_bytes,
            remaining_bytes,
        }
    }

    /// The worked examples of the module doc, as (free after the grant, frames after it).
    #[test]
    fn the_banker_check_matches_the_worked_examples() {
        let cases: &[(u64, &[FrameNeed], bool)] = &[
            // A (10, 50) and B granted 10 of a 60 frame: B (10, 50), free 80.
            (80, &[need(10, 50), need(10, 50)], true),
            // A (40, 20), B (40, 20), C granted 10 of 60: free 10.
            (10, &[need(40, 20), need(40, 20), need(10, 50)], false),
            // A stalled at (1, 99), D granted all of a 10 frame: free 89.
            (89, &[need(1, 99), need(10, 0)], true),
            // Nothing being read.
            (0, &[], true),
            // Two frames that together need more than the budget, in either order.
            (0, &[need(50, 10), need(50, 10)], false),
            (10, &[need(45, 10), need(45, 55)], true),
        ];
        for (free_bytes, frames, safe) in cases {
            assert_eq!(
                all_frames_can_complete(*free_bytes, frames.iter().copied()),
                *safe,
                "free {free_bytes}, frames {frames:?}"
            );
        }
    }

    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        tokio_uring::start(future)
    }

    #[test]
    fn grants_track_used_bytes_and_drops_give_them_back() {
        block_on(async {
            let metrics = ServerMetrics::default();
            let pool = RequestMemoryPool::new(Some(100), metrics.clone());
            let mut a = pool.open_charge(60);
            pool.reserve(&mut a, 40, 40).await.unwrap();
            assert_eq!(pool.used_bytes(), 40);
            assert_eq!(metrics.memory_pool_used.get(), 40.0);
            assert_eq!(metrics.memory_pool_available.get(), 60.0);
            pool.reserve(&mut a, 20, 20).await.unwrap();
            a.complete();
            drop(a);
            assert_eq!(pool.used_bytes(), 0);
            assert_eq!(metrics.memory_pool_available.get(), 100.0);
        });
    }

    /// Two 60-byte frames in a budget of 100: the second waits at the step that would leave
    /// neither able to finish, and goes on once the first frame's bytes come back.
    #[test]
    fn a_grant_that_could_deadlock_waits_for_a_release() {
        block_on(async {
            let metrics = ServerMetrics::default();
            let pool = RequestMemoryPool::new(Some(100), metrics.clone());
            let mut a = pool.open_charge(60);
            pool.reserve(&mut a, 50, 50).await.unwrap();
            let mut b = pool.open_charge(60);
            // Free would be 5: A still needs 10 and B 15, so neither could finish.
            let waiter = {
                let pool = pool.clone();
                tokio_uring::spawn(async move {
                    assert_eq!(pool.reserve(&mut b, 45, 45).await, Ok(45));
                    b
                })
            };
            while metrics.frames_waiting_for_memory.get() < 1.0 {
                tokio::task::yield_now().await;
            }
            assert_eq!(pool.used_bytes(), 50);
            pool.reserve(&mut a, 10, 10).await.unwrap();
            a.complete();
            drop(a);
            let b = waiter.await.unwrap();
            assert_eq!(b.held_bytes(), 45);
            assert_eq!(metrics.frames_waiting_for_memory.get(), 0.0);
        });
    }

    /// The larger step when it is safe, else the smaller one, else nothing when nothing is the
    /// minimum (the frame's buffer may grow within the connection's free bytes).
    #[test]
    fn a_grant_takes_the_preferred_step_when_safe_else_the_minimum() {
        block_on(async {
            let pool = RequestMemoryPool::new(Some(100), ServerMetrics::default());
            let mut a = pool.open_charge(60);
            assert_eq!(pool.reserve(&mut a, 10, 60).await, Ok(60));
            let mut b = pool.open_charge(60);
            // 40 free: not B's 60, but 20 is safe: A (complete) gives its 60 back, then B
            // takes its last 40.
            assert_eq!(pool.reserve(&mut b, 20, 60).await, Ok(20));
            let mut c = pool.open_charge(60);
            assert_eq!(pool.reserve(&mut c, 0, 30).await, Ok(0));
            assert_eq!(pool.used_bytes(), 80);
        });
    }

    #[test]
    fn close_fails_the_waiters() {
        block_on(async {
            let metrics = ServerMetrics::default();
            let pool = RequestMemoryPool::new(Some(10), metrics.clone());
            let mut a = pool.open_charge(10);
            pool.reserve(&mut a, 5, 5).await.unwrap();
            let mut b = pool.open_charge(10);
            let waiter = {
                let pool = pool.clone();
                tokio_uring::spawn(async move { pool.reserve(&mut b, 1, 1).await })
            };
            while metrics.frames_waiting_for_memory.get() < 1.0 {
                tokio::task::yield_now().await;
            }
            pool.close();
            assert_eq!(waiter.await.unwrap(), Err(PoolClosed));
            assert_eq!(pool.reserve(&mut a, 5, 5).await, Err(PoolClosed));
        });
    }

    #[test]
    fn an_unbounded_pool_grants_everything_and_counts_it() {
        block_on(async {
            let metrics = ServerMetrics::default();
            let pool = RequestMemoryPool::new(None, metrics.clone());
            let mut a = pool.open_charge(1 << 40);
            pool.reserve(&mut a, 1 << 40, 1 << 40).await.unwrap();
            assert_eq!(metrics.memory_pool_used.get(), (1u64 << 40) as f64);
            assert_eq!(metrics.memory_pool_available.get(), f64::INFINITY);
        });
    }
}
