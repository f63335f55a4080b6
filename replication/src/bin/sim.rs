//! The simulator runner:
//! `cargo run -p ringlog-replication --features sim --bin sim -- --seeds N [--profile three|mixed|single]
//! [--seed S] [--start S] [--mutation NAME] [--partitions 1-4]`
//!
//! Runs seeds `start..start+N` (or the single seed S), prints how often each fault class fired
//! and, for every failing seed, the violation and a one-line replay command. Exits non-zero on
//! any violation.

use std::collections::BTreeMap;
use std::process::ExitCode;

use ringlog_replication::Mutation;
use ringlog_replication::sim::{Profile, SimOptions, SnapshotMutation, run_seed};

fn usage() -> ExitCode {
    eprintln!(
        "usage: sim [--seeds N] [--start S] [--seed S] [--profile three|mixed|single] [--partitions 1-4] [--mutation {}|{}]",
        Mutation::ALL.map(|m| m.name()).join("|"),
        SnapshotMutation::ALL.map(|m| m.name()).join("|")
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut seeds = 100u64;
    let mut start = 0u64;
    let mut single = None;
    let mut profile = Profile::Three;
    let mut mutation = None;
    let mut snapshot_mutation = None;
    let mut partitions = None;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let value = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--seeds" => seeds = value.parse().unwrap_or(0),
            "--start" => start = value.parse().unwrap_or(0),
            "--seed" => single = value.parse().ok(),
            "--profile" => match Profile::from_name(&value) {
                Some(p) => profile = p,
                None => return usage(),
            },
            "--mutation" => match (
                Mutation::from_name(&value),
                SnapshotMutation::from_name(&value),
            ) {
                (Some(m), _) => mutation = Some(m),
                (_, Some(m)) => snapshot_mutation = Some(m),
                _ => return usage(),
            },
            "--partitions" => match value.parse() {
                Ok(p @ 1..=4) => partitions = Some(p),
                _ => return usage(),
            },
            _ => return usage(),
        }
        i += 2;
    }
    let range: Vec<u64> = match single {
        Some(seed) => vec![seed],
        None => (start..start + seeds).collect(),
    };
    // Core assertions are reported as violations with their seed; keep stderr readable.
    std::panic::set_hook(Box::new(|_| {}));
    let mut faults: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut failures = Vec::new();
    let (mut events, mut committed, mut elections) = (0u64, 0usize, 0usize);
    for &seed in &range {
        let mut options = SimOptions::new(seed, profile);
        options.mutation = mutation;
        options.snapshot_mutation = snapshot_mutation;
        options.partitions = partitions;
        let report = run_seed(&options);
        for (fault, count) in &report.faults {
            *faults.entry(fault).or_default() += count;
        }
        events += report.events;
        committed += report.client_batches_committed;
        elections += report.elections;
        if single.is_some() {
            println!(
                "seed {seed}: {} voters, {} observers, {} partitions, {} events, {} client batches committed, {} elections, trace {:016x}",
                report.voters,
                report.observers,
                report.partitions,
                report.events,
                report.client_batches_committed,
                report.elections,
                report.trace_hash
            );
        }
        if let Some(violation) = report.violation {
            println!(
                "FAIL seed {seed}: {violation}\n  replay: {}",
                options.replay_command()
            );
            failures.push(seed);
        }
    }
    println!(
        "profile {} mutation {}: {} seeds, {} failed; {} events, {} client batches committed, {} elections",
        profile.name(),
        mutation
            .map(|m| m.name())
            .or(snapshot_mutation.map(|m| m.name()))
            .unwrap_or("none"),
        range.len(),
        failures.len(),
        events,
        committed,
        elections
    );
    println!("fault classes fired:");
    for (fault, count) in &faults {
        println!("  {fault:<22} {count}");
    }
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
