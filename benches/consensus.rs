//! Committed batches per second of one- and three-voter clusters running the production host
//! and the real consensus core in the simulator, with zero network delay and no disk delay
//! (every simulator check still on). Run: `cargo bench --bench consensus`.
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use ringlog_replication::sim::SteadyCluster;
use std::hint::black_box;

fn bench_commit(c: &mut Criterion) {
    let mut group = c.benchmark_group("consensus_commit");
    // The simulated logs live in memory: keep the runs short so they stay small.
    group
        .sample_size(20)
        .measurement_time(std::time::Duration::from_secs(3));
    for voters in [1usize, 3] {
        // One batch of 4 records per append, committed before the next append.
        group.throughput(Throughput::Elements(1));
        group.bench_with_input(
            BenchmarkId::new("one_batch_per_round", voters),
            &voters,
            |b, &voters| {
                let mut cluster = SteadyCluster::new(voters, 1);
                b.iter(|| black_box(cluster.commit(1, 4)));
            },
        );
        // 64 batches per append: the pipeline a linger would build.
        group.throughput(Throughput::Elements(64));
        group.bench_with_input(
            BenchmarkId::new("64_batches_per_round", voters),
            &voters,
            |b, &voters| {
                let mut cluster = SteadyCluster::new(voters, 1);
                b.iter(|| black_box(cluster.commit(64, 4)));
            },
        );
    }
    group.finish();
}

criterion_group!(benches, bench_commit);
criterion_main!(benches);
