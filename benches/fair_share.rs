//! Cost of the KIP-630 FetchSnapshot fair share per response, for 1, 10 and 1,000 partitions.
//! Run: `cargo bench --bench fair_share`.
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use ringlog_replication::fair_share::{FairShareConfig, PartitionRequest, fair_share};
use std::hint::black_box;

/// Partitions with a spread of remaining bytes (some nearly done, some large) so the water level
/// lands in the middle and both the "served whole" and "cut" branches run.
fn partitions(count: usize) -> Vec<PartitionRequest> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..count)
        .map(|_| {
            // xorshift: deterministic input without a global RNG.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            PartitionRequest {
                remaining_bytes: state % (64 * 1024 * 1024),
                max_bytes: 16 * 1024 * 1024,
            }
        })
        .collect()
}

fn bench_fair_share(c: &mut Criterion) {
    let config = FairShareConfig::default();
    let mut group = c.benchmark_group("fair_share");
    for count in [1usize, 10, 1_000] {
        let input = partitions(count);
        group.bench_with_input(BenchmarkId::from_parameter(count), &input, |b, input| {
            b.iter(|| {
                fair_share(
                    black_box(config.response_max_bytes),
                    &config,
                    black_box(input),
                )
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_fair_share);
criterion_main!(benches);
