//! Issue 17's bit-flip sweep on real processes: one bit flipped at a time in each on-disk
//! structure of a stopped follower's topic partition (sealed and active segment data, the slot
//! region, the index, the leader-epoch-checkpoint, the quorum-state, partition.metadata, the
//! snapshot at the log start, the log-start-offset-checkpoint of a DeleteRecords cut inside a
//! batch), and in its metadata partition's segment, then the node started again. Each flip must be detected or never read, the node must
//! come back (repairing from the leader where the flip hit acknowledged data), and at the end
//! every acknowledged record must read back from the cluster and the follower's batches equal
//! the leader's: nothing corrupt kept, nothing lost.
//!
//! `RINGLOG_SWEEP_FLIPS=N` flips N bits per structure (default 2, what CI runs);
//! docs/node.md ("Storage faults") has the counts of a longer run. The bits are drawn from a
//! fixed seed (`RINGLOG_SWEEP_SEED` to change it), so a run can be repeated.
//!
//! The quorum-state holds two copies (a forgotten vote cannot be taken back from a peer); a
//! flip in one is read from the other. Were both damaged the node would refuse to start: the
//! sweep would count that, put the file back as an operator restoring it would, and go on.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ringlog_engine::batch::RecordBatchBuilder;

mod quorum;
use quorum::{
    Quorum, dumped_batch_lines, dumped_batches, eventually, produce_to,
    read_partition_batches_from, segment_bases, serial,
};

const TOPIC: &str = "sweep";
/// Where the DeleteRecords cuts: inside the batch at 1000, the second segment's first.
const CUT: i64 = 1050;

/// SplitMix64: the positions of the flips.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// What the follower's log said about one flip.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Clone, Copy)]
enum Outcome {
    /// Damaged acknowledged data set aside and fetched again from the leader.
    RepairedFromLeader,
    /// Found wrong and rebuilt locally: from the data (index, epoch checkpoint), from the
    /// metadata image (partition.metadata), from the file's other copy (quorum-state), or
    /// left unused and taken again from the leader (snapshot skipped, DeleteRecords cut).
    Rebuilt,
    /// The node refused to start (both copies of the quorum-state damaged: not swept).
    Refused,
    /// Recovery found the newest flush unfinished (its slot damaged, no confirmation naming
    /// it) and dropped it: the replica fetches it again like any record it lacks.
    DroppedUnconfirmedFlush,
    /// Nothing said: the flip was in bytes recovery never reads (past a durable mark, an older
    /// slot, a preallocated tail); the final comparison shows nothing corrupt was kept.
    NotRead,
}

/// The byte range of a segment file recovery reads: its data area up to the durable mark
/// (`ringlog dump`'s first line), and its slot region (the last 5 blocks of 4 KiB).
fn segment_ranges(file: &Path) -> (std::ops::Range<u64>, std::ops::Range<u64>) {
    let output = Command::new(quorum::RINGLOG)
        .arg("dump")
        .arg(file)
        .output()
        .expect("ringlog dump runs");
    let text = String::from_utf8(output.stdout).unwrap();
    let number_after = |marker: &str, end: char| -> u64 {
        text.split(marker)
            .nth(1)
            .and_then(|t| t.split(end).next())
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("no {marker:?} in {text}"))
    };
    let mark = number_after("marks the batches' end at byte ", ')');
    let region = number_after("slot region at byte ", ',');
    let len = std::fs::metadata(file).unwrap().len();
    (0..mark, region..len)
}

fn flip(file: &Path, byte: u64, bit: u32) -> Vec<u8> {
    let original = std::fs::read(file).unwrap();
    let mut bytes = original.clone();
    bytes[byte as usize] ^= 1 << bit;
    std::fs::write(file, &bytes).unwrap();
    original
}

fn log_since(log: &Path, from: u64) -> String {
    let bytes = std::fs::read(log).unwrap_or_default();
    String::from_utf8_lossy(&bytes[(from as usize).min(bytes.len())..]).into_owned()
}

/// Whether node `replica` holds every committed record of the topic (DescribeQuorum at the
/// leader), on its disk: a follower below the high-watermark fetches ahead of its flush
/// (docs/raft.md), so the leader hears of records a kill -9 may still take. The sweep flips
/// bits in what the disk holds; killed mid-flush, the active segment could hold nothing yet.
fn caught_up(quorum: &Quorum, replica: i32) -> Option<()> {
    let (mut leader, _) = quorum.partition_leader(TOPIC)?;
    let view = leader.describe_quorum_of(TOPIC, 0).ok()?;
    let state = view
        .partition
        .current_voters
        .iter()
        .find(|v| v.replica_id == replica)?;
    let high_watermark = view.partition.high_watermark;
    (high_watermark > 0
        && state.log_end_offset >= high_watermark
        && durable_end_offset(&quorum.data_dir(replica).join(format!("{TOPIC}-0")))?
            >= high_watermark)
        .then_some(())
}

/// The end offset of the batches the newest segment's slots vouch for (`ringlog dump`).
fn durable_end_offset(dir: &Path) -> Option<i64> {
    let base = *segment_bases(dir).last()?;
    let lines = dumped_batch_lines(&dir.join(format!("{base:020}.log"))).ok()?;
    let last = lines
        .iter()
        .filter_map(|line| line.split("lastOffset: ").nth(1))
        .filter_map(|rest| rest.split(' ').next()?.parse::<i64>().ok())
        .max();
    Some(last.map_or(base as i64, |offset| offset + 1))
}

#[test]
fn every_flipped_bit_of_a_stopped_follower_is_detected_or_unread_and_nothing_is_lost() {
    let flips: u64 = std::env::var("RINGLOG_SWEEP_FLIPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let mut draw = Draw(
        std::env::var("RINGLOG_SWEEP_SEED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(17),
    );
    let _serial = serial();
    let mut quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(30));
    quorum.create_topic(TOPIC, 1, &[("segment.bytes", "1048576")]);
    quorum.wait_for_leader_of(TOPIC, Duration::from_secs(30));
    let (mut client, leader) = eventually(Duration::from_secs(20), "the topic's leader", || {
        quorum.partition_leader(TOPIC)
    });
    // ~2.5 MiB acknowledged (acks=all) in batches of 100 records: three 1 MiB segments.
    let mut acknowledged = Vec::new();
    for batch in 0..25 {
        let mut builder = RecordBatchBuilder::new(0);
        let values: Vec<String> = (0..100)
            .map(|i| format!("{batch}-{i}-{}", "v".repeat(1000)))
            .collect();
        for (i, value) in values.iter().enumerate() {
            builder.append(i as i64, None, Some(value.as_bytes()), &[]);
        }
        let (code, _) = produce_to(&mut client, TOPIC, 0, builder.build().into_bytes());
        assert_eq!(code, 0, "batch {batch}");
        acknowledged.extend(values);
    }
    // A DeleteRecords inside the batch that starts the second segment: an empty snapshot at
    // 1000 (the log then starts there, the first segment goes, so a restart needs the
    // snapshot) and the checkpoint at 1050, on every replica.
    assert_eq!(
        quorum::delete_records(&mut client, TOPIC, CUT, 20_000),
        (0, CUT)
    );
    let acknowledged: Vec<String> = acknowledged.split_off(CUT as usize);

    // Enough topics that the metadata log holds full blocks (its partial last block is read
    // from the slot, so flips in the data area's copy of it are never read).
    let addresses: Vec<String> = (1..=3).map(|id| quorum.address(id)).collect();
    for i in 0..50 {
        quorum::create_topic_at(&addresses, &format!("pad-{i}"), 1, &[]);
    }
    let follower = (1..=3).find(|id| *id != leader).unwrap();
    let dir = quorum.data_dir(follower).join(format!("{TOPIC}-0"));
    eventually(Duration::from_secs(30), "the follower's files", || {
        (segment_bases(&dir).first() == Some(&1000)
            && segment_bases(&dir).len() >= 2
            && dir.join("log-start-offset-checkpoint").exists()
            && dir.join("checkpoints").read_dir().ok()?.count() > 0)
            .then_some(())
    });

    let structures: [&str; 10] = [
        "metadata partition segment data",
        "sealed segment data",
        "active segment data",
        "slot region",
        "index",
        "leader-epoch-checkpoint",
        "quorum-state",
        "partition.metadata",
        "snapshot",
        "log-start-offset-checkpoint",
    ];
    let mut table: Vec<(&str, Outcome)> = Vec::new();
    for structure in structures {
        for _ in 0..flips {
            caught_up_or_fail(&quorum, follower);
            quorum.kill(follower);
            let bases = segment_bases(&dir);
            assert!(
                bases.len() >= 2,
                "{structure}: segments {bases:?} of {}: {:?}",
                dir.display(),
                std::fs::read_dir(&dir)
                    .unwrap()
                    .flatten()
                    .map(|e| (e.file_name(), e.metadata().map(|m| m.len()).unwrap_or(0)))
                    .collect::<Vec<_>>()
            );
            let sealed = dir.join(format!("{:020}.log", bases[bases.len() - 2]));
            let active = dir.join(format!("{:020}.log", bases[bases.len() - 1]));
            let (file, range): (PathBuf, std::ops::Range<u64>) = match structure {
                "metadata partition segment data" => {
                    let metadata = quorum.data_dir(follower).join("__cluster_metadata-0");
                    let last = *segment_bases(&metadata).last().expect("a segment");
                    let file = metadata.join(format!("{last:020}.log"));
                    // Its full blocks.
                    let range = segment_ranges(&file).0;
                    (file, 0..range.end / 4096 * 4096)
                }
                "sealed segment data" => (sealed.clone(), segment_ranges(&sealed).0),
                "active segment data" => (active.clone(), segment_ranges(&active).0),
                "slot region" => (active.clone(), segment_ranges(&active).1),
                "index" => {
                    let index = sealed.with_extension("index");
                    let len = std::fs::metadata(&index).unwrap().len();
                    (index, 0..len)
                }
                "snapshot" => {
                    let snapshot = dir
                        .join("checkpoints")
                        .read_dir()
                        .unwrap()
                        .flatten()
                        .map(|e| e.path())
                        .find(|p| p.extension().is_some_and(|e| e == "checkpoint"))
                        .expect("a snapshot");
                    let len = std::fs::metadata(&snapshot).unwrap().len();
                    (snapshot, 0..len)
                }
                name => {
                    let file = dir.join(name);
                    let len = std::fs::metadata(&file).unwrap().len();
                    (file, 0..len)
                }
            };
            assert!(!range.is_empty(), "{structure}: {}", file.display());
            let byte = range.start + draw.below(range.end - range.start);
            let bit = draw.below(8) as u32;
            let original = flip(&file, byte, bit);
            let log = quorum.node(follower).log.clone();
            let from = std::fs::metadata(&log).map_or(0, |m| m.len());
            quorum.start_node(follower);
            let outcome = outcome_of(&mut quorum, follower, &log, from, &file, &original);
            eprintln!(
                "sweep: {structure}: {} byte {byte} bit {bit}: {outcome:?}",
                file.display()
            );
            table.push((structure, outcome));
        }
    }
    caught_up_or_fail(&quorum, follower);
    assert!(quorum.exited().is_empty(), "{:?}", quorum.exited());

    // Every acknowledged record above the cut, from the leader; then, stopped, the follower's
    // batches are the leader's.
    let read = eventually(Duration::from_secs(30), "the topic read back", || {
        let (mut client, _) = quorum.partition_leader(TOPIC)?;
        values_from(&mut client, CUT)
    });
    assert_eq!(
        read.len(),
        acknowledged.len(),
        "acknowledged records read back"
    );
    assert!(read == acknowledged, "the records read back differ");
    let leader_dir = quorum.data_dir(leader).join(format!("{TOPIC}-0"));
    quorum.kill_all();
    assert_eq!(dumped_batches(&dir), dumped_batches(&leader_dir));

    let mut counts = std::collections::BTreeMap::<(&str, Outcome), usize>::new();
    for entry in &table {
        *counts.entry(*entry).or_default() += 1;
    }
    eprintln!("sweep: {} flips, seed as set; outcomes:", table.len());
    for ((structure, outcome), n) in &counts {
        eprintln!("sweep: | {structure} | {outcome:?} | {n} |");
    }
}

/// The values of the topic's records from `from` to the high-watermark, from its leader (the
/// records of a batch below `from` skipped, as a consumer does; control batches hold none).
fn values_from(client: &mut ringlog_net::client::Client, from: i64) -> Option<Vec<String>> {
    let mut values = Vec::new();
    for batch in read_partition_batches_from(client, TOPIC, from).ok()? {
        if batch.is_control() {
            continue;
        }
        for record in batch.records().ok()? {
            let record = record.ok()?;
            if record.offset() >= from {
                values.push(String::from_utf8(record.value()?.to_vec()).ok()?);
            }
        }
    }
    Some(values)
}

fn caught_up_or_fail(quorum: &Quorum, follower: i32) {
    eventually(
        Duration::from_secs(60),
        &format!("node {follower} caught up"),
        || caught_up(quorum, follower),
    );
}

/// Waits for the restarted follower to come back (or to refuse), and reads what its log said.
fn outcome_of(
    quorum: &mut Quorum,
    follower: i32,
    log: &Path,
    from: u64,
    file: &Path,
    original: &[u8],
) -> Outcome {
    let partition_dir = quorum.data_dir(follower).join(format!("{TOPIC}-0"));
    // Back serving and caught up, or exited.
    let exited = eventually(
        Duration::from_secs(60),
        &format!("node {follower} back after a flip in {}", file.display()),
        || {
            if quorum.exited().iter().any(|(id, _)| *id == follower) {
                return Some(true);
            }
            let said = log_since(log, from);
            let ours = |l: &&str| l.contains(&format!("{TOPIC}-0"));
            let started = said
                .lines()
                .any(|l| l.contains("partition started") && ours(&l));
            // After a kill, the batches its lists name are checked behind the start
            // (net/src/node/listed_checks.rs): wait for that check's verdict too.
            let checked = !said.lines().any(|l| l.contains("taken unread") && ours(&l))
                || said.lines().any(|l| {
                    (l.contains("all read back") || l.contains("does not read back")) && ours(&l)
                });
            (started
                && checked
                && caught_up(quorum, follower).is_some()
                && !partition_dir.join("repair-pending").exists())
            .then_some(false)
        },
    );
    if exited {
        let said = log_since(log, from);
        assert!(
            said.contains("quorum-state"),
            "node {follower} exited on a flip in {}: {}",
            file.display(),
            said.lines().rev().take(5).collect::<Vec<_>>().join("\n")
        );
        // The operator restores the file.
        quorum.kill(follower);
        std::fs::write(file, original).unwrap();
        quorum.start_node(follower);
        caught_up_or_fail(quorum, follower);
        return Outcome::Refused;
    }
    // What the node said of the flipped partition's files.
    let folder = file
        .ancestors()
        .find(|a| {
            a.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with("-0"))
        })
        .and_then(|a| a.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .expect("a partition folder");
    let said: String = log_since(log, from)
        .lines()
        .filter(|l| l.contains(&folder))
        .collect::<Vec<_>>()
        .join("\n");
    if said.contains("set aside in damaged/") {
        Outcome::RepairedFromLeader
    } else if said.contains("truncated: Some(") {
        Outcome::DroppedUnconfirmedFlush
    } else if (said.contains("indexes_rebuilt: [") && !said.contains("indexes_rebuilt: []"))
        || said.contains("epoch_checkpoint_rewritten: true")
        || said.contains("written again from the metadata image")
        || said.contains("offset checkpoint not trusted")
        || said.contains("invalid snapshot skipped")
        || said.contains("copy is damaged")
    {
        Outcome::Rebuilt
    } else {
        Outcome::NotRead
    }
}
