//! The simulator runner:
//! `cargo run -p ringlog-replication --features sim --bin sim -- --seeds N [--profile three|mixed|single]
//! [--seed S] [--start S] [--mutation NAME] [--partitions 1-4]`, or with `--host [--voters 1-5] [--observers 0-2]
//! [--fault-phase-ms MS] [--reconfig]`
//! the host-driven mode (every node the production `Host` over the in-memory disk; mutations
//! `acknowledge-before-flush`, `send-before-quorum-state` and the core's; partitions 1-3;
//! `--reconfig`: 3 voters and 2 spares, voters added, removed and replaced under the faults).
//!
//! Runs seeds `start..start+N` (or the single seed S), prints how often each fault class fired
//! and, for every failing seed, the violation and a one-line replay command. Exits non-zero on
//! any violation.

use std::collections::BTreeMap;
use std::process::ExitCode;

use ringlog_replication::Mutation;
use ringlog_replication::host::HostMutation;
use ringlog_replication::sim::host_cluster::{host_mutation_from_name, host_mutation_name};
use ringlog_replication::sim::{
    HostSimOptions, Profile, SimOptions, SimReport, SnapshotMutation, run_host_seed, run_seed,
};

fn usage() -> ExitCode {
    eprintln!(
        "usage: sim [--seeds N] [--start S] [--seed S] [--profile three|mixed|single] [--partitions 1-4] [--mutation {}|{}]\n       sim --host [--reconfig] [--voters 1-5] [--observers 0-2] [--fault-phase-ms MS] [--seeds N] [--start S] [--seed S] [--partitions 1-3] [--mutation {}|{}|{}|{}]",
        Mutation::ALL.map(|m| m.name()).join("|"),
        SnapshotMutation::ALL.map(|m| m.name()).join("|"),
        host_mutation_name(HostMutation::AcknowledgeBeforeFlush),
        host_mutation_name(HostMutation::SendBeforeQuorumState),
        host_mutation_name(HostMutation::SnapshotOneRecordOff),
        Mutation::ALL.map(|m| m.name()).join("|"),
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
    let mut host = false;
    let mut reconfig = false;
    let mut voters = None;
    let mut observers = None;
    let mut fault_phase_ms = None;
    let mut host_mutation = None;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let value = args.get(i + 1).cloned().unwrap_or_default();
        if args[i] == "--host" || args[i] == "--reconfig" {
            host |= args[i] == "--host";
            reconfig |= args[i] == "--reconfig";
            i += 1;
            continue;
        }
        match args[i].as_str() {
            "--fault-phase-ms" => match value.parse() {
                Ok(ms) => fault_phase_ms = Some(ms),
                _ => return usage(),
            },
            "--voters" => match value.parse() {
                Ok(v @ 1..=5) => voters = Some(v),
                _ => return usage(),
            },
            "--observers" => match value.parse() {
                Ok(o @ 0..=2) => observers = Some(o),
                _ => return usage(),
            },
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
                host_mutation_from_name(&value),
            ) {
                (Some(m), _, _) => mutation = Some(m),
                (_, Some(m), _) => snapshot_mutation = Some(m),
                (_, _, Some(m)) => host_mutation = Some(m),
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
    // The host-driven mode takes only its own switches.
    let host_only = host_mutation.is_some()
        || voters.is_some()
        || observers.is_some()
        || fault_phase_ms.is_some()
        || reconfig;
    let model_only = snapshot_mutation.is_some();
    if (host && (model_only || partitions.is_some_and(|p| p > 3))) || (!host && host_only) {
        return usage();
    }
    // Core assertions are reported as violations with their seed; keep stderr readable.
    std::panic::set_hook(Box::new(|_| {}));
    let mut faults: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut failures = Vec::new();
    let (mut events, mut committed, mut elections) = (0u64, 0usize, 0usize);
    for &seed in &range {
        let (report, replay): (SimReport, String) = if host {
            let mut options = HostSimOptions::new(seed);
            options.voters = voters;
            options.observers = observers;
            options.partitions = partitions;
            options.mutation = host_mutation;
            options.core_mutation = mutation;
            options.reconfig = reconfig;
            if let Some(ms) = fault_phase_ms {
                options.fault_phase_ms = ms;
            }
            (run_host_seed(&options), options.replay_command())
        } else {
            let mut options = SimOptions::new(seed, profile);
            options.mutation = mutation;
            options.snapshot_mutation = snapshot_mutation;
            options.partitions = partitions;
            (run_seed(&options), options.replay_command())
        };
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
            println!("FAIL seed {seed}: {violation}\n  replay: {replay}");
            failures.push(seed);
        }
    }
    println!(
        "profile {} mutation {}: {} seeds, {} failed; {} events, {} client batches committed, {} elections",
        if host { "host" } else { profile.name() },
        mutation
            .map(|m| m.name())
            .or(snapshot_mutation.map(|m| m.name()))
            .or(host_mutation.map(host_mutation_name))
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
