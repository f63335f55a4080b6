//! Property tests of the KIP-630 FetchSnapshot fair share, one property per rule in
//! `ringlog_replication::fair_share`'s module doc.
use proptest::prelude::*;
use ringlog_replication::fair_share::{
    FairShareConfig, PartitionRequest, fair_share, partition_demand_bytes,
};

fn arb_input() -> impl Strategy<Value = (u64, FairShareConfig, Vec<PartitionRequest>)> {
    // Mix small values (ties, exhausted snapshots, tiny caps) with large ones (overflow paths).
    let bytes = prop_oneof![0u64..64, 0u64..100_000, any::<u64>()];
    let partition =
        (bytes.clone(), bytes.clone()).prop_map(|(remaining_bytes, max_bytes)| PartitionRequest {
            remaining_bytes,
            max_bytes,
        });
    (
        bytes.clone(),
        bytes.clone(),
        bytes,
        prop::collection::vec(partition, 0..40),
    )
        .prop_map(
            |(cap, partition_max_bytes, response_max_bytes, partitions)| {
                let config = FairShareConfig {
                    partition_max_bytes,
                    response_max_bytes,
                };
                (cap.min(response_max_bytes), config, partitions)
            },
        )
}

fn demands(config: &FairShareConfig, partitions: &[PartitionRequest]) -> Vec<u64> {
    partitions
        .iter()
        .map(|p| partition_demand_bytes(p, config))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    // KIP-630: the leader never sends more than ResponseMaxBytes in one response.
    #[test]
    fn total_never_exceeds_the_cap((cap, config, partitions) in arb_input()) {
        let shares = fair_share(cap, &config, &partitions);
        prop_assert_eq!(shares.len(), partitions.len());
        let total: u128 = shares.iter().map(|&s| u128::from(s)).sum();
        prop_assert!(total <= u128::from(cap));
    }

    // A partition never gets more than it has left, its own MaxBytes, or the per-partition cap.
    #[test]
    fn no_partition_exceeds_its_demand((cap, config, partitions) in arb_input()) {
        let shares = fair_share(cap, &config, &partitions);
        for (share, p) in shares.iter().zip(&partitions) {
            prop_assert!(*share <= p.remaining_bytes);
            prop_assert!(*share <= p.max_bytes);
            prop_assert!(*share <= config.partition_max_bytes);
        }
    }

    // KIP-630: each partition gets at least the average share if it has that many bytes left.
    #[test]
    fn each_partition_gets_at_least_min_of_demand_and_average((cap, config, partitions) in arb_input()) {
        prop_assume!(!partitions.is_empty());
        let shares = fair_share(cap, &config, &partitions);
        let average = cap / partitions.len() as u64;
        for (share, demand) in shares.iter().zip(demands(&config, &partitions)) {
            prop_assert!(*share >= demand.min(average), "share {} demand {} average {}", share, demand, average);
        }
    }

    // KIP-630: what a short partition leaves unused goes to the others (water-filling): a
    // partition that is cut below its demand gets at most one byte less than any other.
    #[test]
    fn leftovers_flow_to_the_others((cap, config, partitions) in arb_input()) {
        let shares = fair_share(cap, &config, &partitions);
        let demands = demands(&config, &partitions);
        for (i, (&share_i, &demand_i)) in shares.iter().zip(&demands).enumerate() {
            if share_i < demand_i {
                for (j, &share_j) in shares.iter().enumerate() {
                    prop_assert!(share_j <= share_i + 1, "partition {} cut at {} but {} got {}", i, share_i, j, share_j);
                }
            }
        }
    }

    // No byte is wasted: the response is full, or every partition got everything it could take.
    #[test]
    fn no_bytes_wasted((cap, config, partitions) in arb_input()) {
        let shares = fair_share(cap, &config, &partitions);
        let total: u128 = shares.iter().map(|&s| u128::from(s)).sum();
        let total_demand: u128 = demands(&config, &partitions).iter().map(|&d| u128::from(d)).sum();
        prop_assert_eq!(total, total_demand.min(u128::from(cap)));
    }

    // Deterministic: the same request gets the same answer, and the multiset of shares does not
    // depend on the order partitions are listed in.
    #[test]
    fn deterministic((cap, config, partitions) in arb_input()) {
        let first = fair_share(cap, &config, &partitions);
        prop_assert_eq!(&first, &fair_share(cap, &config, &partitions));
        let mut reversed = partitions.clone();
        reversed.reverse();
        let mut a = first.clone();
        let mut b = fair_share(cap, &config, &reversed);
        a.sort_unstable();
        b.sort_unstable();
        prop_assert_eq!(a, b);
    }
}
