//! KIP-630 FetchSnapshot: how a leader shares one response's byte budget across partitions.
//!
//! A FetchSnapshot request names several partitions, each with a Position into its snapshot and
//! its own MaxBytes. The response may carry at most
//! `min(request MaxBytes, replica.fetch.snapshot.response.max.bytes)` bytes in total (the *cap*).
//! KIP-630 asks that
//!
//! 1. each partition receives at least the average share of the cap if its snapshot has that
//!    many bytes left, and
//! 2. what a partition with fewer bytes left does not use goes to the others.
//!
//! That is max-min fairness, computed by water-filling: every partition has a *demand*
//! `min(Size - Position, its MaxBytes, replica.fetch.snapshot.max.bytes)`; a water level `L`
//! rises until the partitions' `min(demand, L)` add up to the cap (or every demand is met).
//! Integer division leaves fewer than `n` spare bytes; they go one each to the unsatisfied
//! partitions in request order, so the answer is a deterministic function of the input and no
//! byte is wasted.
//!
//! Worked example: cap 100, demands `[10, 80, 60]`. The average is 33: partition 0 takes its
//! 10, leaving 90 for two partitions, 45 each; both want more than 45, so the answer is
//! `[10, 45, 45]` (total 100 = the cap).
//!
//! This is a pure function: the caller (the Raft core's FetchSnapshot handler) looks up each
//! snapshot's size, rejects a Position past Size with POSITION_OUT_OF_RANGE *before* calling it,
//! and then streams `bytes[i]` bytes from Position for partition `i`.

/// `replica.fetch.snapshot.max.bytes` default (KIP-630: 10 MB): the most sent per partition.
pub const REPLICA_FETCH_SNAPSHOT_MAX_BYTES_DEFAULT: u64 = 10 * 1024 * 1024;
/// `replica.fetch.snapshot.response.max.bytes` default (KIP-630: 10 MB): the most sent per
/// response, over every partition.
pub const REPLICA_FETCH_SNAPSHOT_RESPONSE_MAX_BYTES_DEFAULT: u64 = 10 * 1024 * 1024;

/// The leader's configured limits for FetchSnapshot responses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FairShareConfig {
    /// `replica.fetch.snapshot.max.bytes`: per-partition cap.
    pub partition_max_bytes: u64,
    /// `replica.fetch.snapshot.response.max.bytes`: whole-response cap.
    pub response_max_bytes: u64,
}

impl Default for FairShareConfig {
    fn default() -> Self {
        FairShareConfig {
            partition_max_bytes: REPLICA_FETCH_SNAPSHOT_MAX_BYTES_DEFAULT,
            response_max_bytes: REPLICA_FETCH_SNAPSHOT_RESPONSE_MAX_BYTES_DEFAULT,
        }
    }
}

/// One requested partition, as the FetchSnapshot handler sees it after validation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionRequest {
    /// Size − Position of the snapshot (bytes the follower still lacks).
    pub remaining_bytes: u64,
    /// The partition's MaxBytes from the request (negative wire values clamp to 0).
    pub max_bytes: u64,
}

impl PartitionRequest {
    /// Build from the wire fields: `size_bytes` of the snapshot, the request's `position` and
    /// `max_bytes` (an int32 on the wire). Returns `None` when Position is outside
    /// `0..=size_bytes`: the caller answers POSITION_OUT_OF_RANGE for that partition.
    pub fn from_wire(size_bytes: u64, position: i64, max_bytes: i32) -> Option<PartitionRequest> {
        let position = u64::try_from(position).ok()?;
        let remaining_bytes = size_bytes.checked_sub(position)?;
        Some(PartitionRequest {
            remaining_bytes,
            max_bytes: u64::try_from(max_bytes).unwrap_or(0),
        })
    }
}

/// The response cap: `min(request MaxBytes, replica.fetch.snapshot.response.max.bytes)`.
/// A negative request MaxBytes allows nothing.
pub fn response_cap_bytes(request_max_bytes: i32, config: &FairShareConfig) -> u64 {
    u64::try_from(request_max_bytes)
        .unwrap_or(0)
        .min(config.response_max_bytes)
}

/// What partition `i` could use on its own: bounded by what it has left and both its caps.
pub fn partition_demand_bytes(partition: &PartitionRequest, config: &FairShareConfig) -> u64 {
    partition
        .remaining_bytes
        .min(partition.max_bytes)
        .min(config.partition_max_bytes)
}

/// Bytes to send per partition (same order as `partitions`) under a response cap of
/// `cap_bytes` (see [`response_cap_bytes`]). See the module doc for the rules.
pub fn fair_share(
    cap_bytes: u64,
    config: &FairShareConfig,
    partitions: &[PartitionRequest],
) -> Vec<u64> {
    let demands: Vec<u64> = partitions
        .iter()
        .map(|p| partition_demand_bytes(p, config))
        .collect();
    let shares = water_fill(cap_bytes, &demands);
    debug_assert_eq!(shares.len(), partitions.len());
    debug_assert!(shares.iter().map(|&s| u128::from(s)).sum::<u128>() <= u128::from(cap_bytes));
    shares
}

/// Max-min fair split of `cap_bytes` over `demands`.
///
/// Walk the demands in ascending order: while the smallest unserved demand fits under an even
/// split of what is left, serve it whole; the first one that does not fit sets the water level
/// `left / unserved` for itself and every larger demand.
pub fn water_fill(cap_bytes: u64, demands: &[u64]) -> Vec<u64> {
    let total_demand: u128 = demands.iter().map(|&d| u128::from(d)).sum();
    if total_demand <= u128::from(cap_bytes) {
        return demands.to_vec();
    }
    let mut ascending: Vec<u64> = demands.to_vec();
    ascending.sort_unstable();
    let mut left_bytes = cap_bytes;
    let mut unserved = demands.len() as u64;
    let mut level_bytes = 0;
    let mut spare_bytes = 0;
    for &demand in &ascending {
        // Unserved >= 1 here: the total demand exceeds the cap, so some demand is cut.
        if u128::from(demand) * u128::from(unserved) <= u128::from(left_bytes) {
            left_bytes -= demand;
            unserved -= 1;
        } else {
            level_bytes = left_bytes / unserved;
            spare_bytes = left_bytes % unserved;
            break;
        }
    }
    assert!(
        unserved > 0,
        "water_fill: total demand above the cap but every demand was served"
    );
    demands
        .iter()
        .map(|&demand| {
            if demand <= level_bytes {
                demand
            } else if spare_bytes > 0 {
                // demand > level, so demand >= level + 1: the extra byte is always usable.
                spare_bytes -= 1;
                level_bytes + 1
            } else {
                level_bytes
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // KIP-630: each partition gets at least the average; short partitions' leftovers go to others.
    #[test]
    fn worked_example_from_the_module_doc() {
        assert_eq!(water_fill(100, &[10, 80, 60]), vec![10, 45, 45]);
    }

    #[test]
    fn spare_bytes_go_to_unsatisfied_partitions_in_request_order() {
        // 10 over three partitions that each want 5: level 3, one spare byte to the first.
        assert_eq!(water_fill(10, &[5, 5, 5]), vec![4, 3, 3]);
        assert_eq!(water_fill(10, &[1, 5, 5]), vec![1, 5, 4]);
    }

    #[test]
    fn wire_values_are_validated() {
        assert_eq!(PartitionRequest::from_wire(10, 11, 5), None);
        assert_eq!(PartitionRequest::from_wire(10, -1, 5), None);
        assert_eq!(
            PartitionRequest::from_wire(10, 10, -5),
            Some(PartitionRequest {
                remaining_bytes: 0,
                max_bytes: 0
            })
        );
        assert_eq!(response_cap_bytes(-1, &FairShareConfig::default()), 0);
        assert_eq!(
            response_cap_bytes(i32::MAX, &FairShareConfig::default()),
            REPLICA_FETCH_SNAPSHOT_RESPONSE_MAX_BYTES_DEFAULT
        );
    }
}
