//! The simulator runner: every node runs the production host (docs/simulator.md):
//! `cargo run -p ringlog-replication --features sim --bin sim -- [--seeds N] [--start S]
//! [--seed S] [--voters 1-5] [--observers 0-2] [--partitions 1-4] [--reconfig]
//! [--fault-phase-ms MS] [--grain-ms MS] [--mutation NAME] [--trace]` (`--trace`: one seed's
//! history on stderr; `--grain-ms`: long polls end on multiples of MS, as the node's do).
//!
//! Runs seeds `start..start+N` (or the single seed S), prints how often each fault class fired
//! and, for every failing seed, the violation and a one-line replay command. Exits non-zero on
//! any violation. `--reconfig`: 3 voters and 2 spares, voters added, removed and replaced under
//! the faults. Mutations: the host's (`acknowledge-before-flush`, `send-before-quorum-state`,
//! `snapshot-one-record-off`) and the core's (`double-vote`, `hw-without-majority`, …).
//! `--host` (the name of this mode while a model executor existed) is accepted and changes
//! nothing, so older replay commands still run.

use std::collections::BTreeMap;
use std::process::ExitCode;

use ringlog_replication::Mutation;
use ringlog_replication::host::HostMutation;
use ringlog_replication::sim::host_cluster::{host_mutation_from_name, host_mutation_name};
use ringlog_replication::sim::{HostSimOptions, run_host_seed};

fn usage() -> ExitCode {
    eprintln!(
        "usage: sim [--seeds N] [--start S] [--seed S] [--voters 1-5] [--observers 0-2] [--partitions 1-4] [--reconfig] [--trace] [--fault-phase-ms MS] [--grain-ms MS] [--mutation {}|{}|{}|{}]",
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
    let mut core_mutation = None;
    let mut host_mutation = None;
    let mut partitions = None;
    let mut reconfig = false;
    let mut trace = false;
    let mut voters = None;
    let mut observers = None;
    let mut fault_phase_ms = None;
    let mut grain_ms = 0;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--host" => {
                i += 1;
                continue;
            }
            "--reconfig" => {
                reconfig = true;
                i += 1;
                continue;
            }
            "--trace" => {
                trace = true;
                i += 1;
                continue;
            }
            _ => {}
        }
        let value = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--fault-phase-ms" => match value.parse() {
                Ok(ms) => fault_phase_ms = Some(ms),
                _ => return usage(),
            },
            "--grain-ms" => match value.parse() {
                Ok(ms) => grain_ms = ms,
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
            "--mutation" => match (Mutation::from_name(&value), host_mutation_from_name(&value)) {
                (Some(m), _) => core_mutation = Some(m),
                (_, Some(m)) => host_mutation = Some(m),
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
        let mut options = HostSimOptions::new(seed);
        options.voters = voters;
        options.observers = observers;
        options.partitions = partitions;
        options.mutation = host_mutation;
        options.core_mutation = core_mutation;
        options.reconfig = reconfig;
        options.trace = trace;
        if let Some(ms) = fault_phase_ms {
            options.fault_phase_ms = ms;
        }
        options.long_poll_grain_ms = grain_ms;
        let report = run_host_seed(&options);
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
        "{} mutation {}: {} seeds, {} failed; {} events, {} client batches committed, {} elections",
        if reconfig { "reconfig" } else { "host" },
        core_mutation
            .map(|m| m.name())
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
