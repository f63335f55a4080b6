//! KIP-630 snapshot files on the memory backend: write, freeze, load, raw FetchSnapshot copy,
//! listing, Kafka's shipped naming, deletion.
use std::path::{Path, PathBuf};

use bytes::Bytes;
use ringlog_engine::io::{Io, MemoryIo, Op, OpenOptions};
use ringlog_engine::snapshot::{
    PartPolicy, RawSnapshotReader, RawSnapshotWriter, SnapshotEncoder, SnapshotError,
    SnapshotFileState, SnapshotFormat, SnapshotId, SnapshotNaming, SnapshotRecordSink,
    StructureError, delete_snapshots_before, latest_valid_snapshot, list_snapshots, naming,
    recover_snapshot_dir, write_snapshot,
};

const DIR: &str = "/data/__cluster_metadata-0";

fn format() -> SnapshotFormat {
    SnapshotFormat {
        name: "test-kv".into(),
        version: 3,
    }
}

fn records(n: usize, salt: u8) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    (0..n)
        .map(|i| (format!("key-{i}").into_bytes(), Some(vec![salt; i % 300])))
        .collect()
}

fn write(io: &mut MemoryIo, id: SnapshotId, records: &[(Vec<u8>, Option<Vec<u8>>)]) -> PathBuf {
    write_snapshot(
        io,
        Path::new(DIR),
        id,
        &format(),
        1_700_000_000_000,
        |sink| {
            for (key, value) in records {
                sink.append_record(Some(key), value.as_deref());
            }
        },
    )
    .unwrap()
}

fn loaded_records(
    contents: &ringlog_engine::snapshot::SnapshotContents,
) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    contents
        .records()
        .map(|r| {
            let r = r.unwrap();
            (r.key().unwrap().to_vec(), r.value().map(|v| v.to_vec()))
        })
        .collect()
}

/// Put raw bytes at `path` durably (create, write, fdatasync, folder fsync).
fn put_file(io: &mut MemoryIo, path: &Path, data: &[u8]) {
    io.create_dir_all(path.parent().unwrap()).unwrap();
    let file = io
        .open(
            path,
            OpenOptions {
                create: true,
                ..Default::default()
            },
        )
        .unwrap();
    let mut buf = ringlog_engine::io::AlignedBuf::with_capacity(data.len(), io.block_size_bytes());
    buf.extend_from_slice(data);
    io.submit_linked(vec![
        Op::Write {
            file,
            offset: 0,
            buf,
        },
        Op::Fdatasync { file },
    ]);
    io.submit_and_wait(2).unwrap();
    let mut done = Vec::new();
    io.drain_completions(&mut done);
    assert!(done.iter().all(|c| c.result.is_ok()));
    io.close(file).unwrap();
    io.sync_dir(path.parent().unwrap()).unwrap();
}

// KIP-630: header first, the state machine's records, footer last; the name carries the id.
#[test]
fn written_snapshot_loads_back_with_its_records_and_format() {
    let mut io = MemoryIo::with_seed(1);
    let id = SnapshotId {
        end_offset: 5_120_793,
        epoch: 2,
    };
    let input = records(20_000, 7);
    let path = write(&mut io, id, &input);
    assert_eq!(
        path,
        Path::new(DIR).join("checkpoints/00000000000005120793-00000000000000000002.checkpoint")
    );
    // Durable: a crash right after freeze keeps it.
    io.crash();
    let (contents, skipped) = latest_valid_snapshot(&mut io, Path::new(DIR)).unwrap();
    assert!(skipped.is_empty());
    let contents = contents.unwrap();
    assert_eq!(contents.snapshot_id, id);
    assert_eq!(contents.format, Some(format()));
    assert_eq!(
        contents.header.last_contained_log_timestamp,
        1_700_000_000_000
    );
    assert_eq!(contents.records_count, 20_000);
    assert!(
        contents.data_batches().len() > 1,
        "1 MiB batches: several for this state"
    );
    assert_eq!(loaded_records(&contents), input);
    // Offsets start at 0 (the header) and continue through the data batches, as in Kafka.
    assert_eq!(contents.data_batches()[0].base_offset(), 1);
    assert!(
        contents
            .data_batches()
            .iter()
            .all(|b| b.partition_leader_epoch() == 2)
    );
}

#[test]
fn empty_state_still_has_header_and_footer() {
    let mut io = MemoryIo::with_seed(2);
    let id = SnapshotId {
        end_offset: 0,
        epoch: 0,
    };
    write(&mut io, id, &[]);
    let (contents, _) = latest_valid_snapshot(&mut io, Path::new(DIR)).unwrap();
    let contents = contents.unwrap();
    assert_eq!(contents.records_count, 0);
    assert!(contents.data_batches().is_empty());
}

// Frozen snapshots are read-only: a second writer for the same id is refused.
#[test]
fn frozen_snapshot_cannot_be_rewritten() {
    let mut io = MemoryIo::with_seed(3);
    let id = SnapshotId {
        end_offset: 10,
        epoch: 1,
    };
    write(&mut io, id, &records(3, 1));
    let error =
        ringlog_engine::snapshot::SnapshotWriter::create(&mut io, Path::new(DIR), id).unwrap_err();
    assert!(
        matches!(error, SnapshotError::AlreadyExists { .. }),
        "{error}"
    );
}

// KIP-630 FetchSnapshot: the follower copies the leader's bytes chunk by chunk at each Position,
// and freezes once Size bytes arrived; gaps and overlaps are typed errors.
#[test]
fn raw_copy_through_regions_reproduces_the_snapshot() {
    let mut leader = MemoryIo::with_seed(4);
    let mut follower = MemoryIo::with_seed(5);
    let id = SnapshotId {
        end_offset: 777,
        epoch: 4,
    };
    let input = records(3_000, 9);
    write(&mut leader, id, &input);
    let reader = RawSnapshotReader::open(&mut leader, Path::new(DIR), id).unwrap();
    let size = reader.size_bytes();
    let mut writer =
        RawSnapshotWriter::create(&mut follower, Path::new(DIR), id, size, false).unwrap();
    let chunk = 100_000u64;
    while !writer.is_complete() {
        let region = reader.region(writer.position(), chunk).unwrap();
        let bytes = reader.read_region(&mut leader, &region).unwrap();
        let position = writer.position();
        if position > 0 {
            // An overlap and a gap are refused and change nothing.
            let overlap = writer
                .write_at(&mut follower, position - 1, &bytes)
                .unwrap_err();
            assert!(
                matches!(overlap, SnapshotError::NotContiguous { .. }),
                "{overlap}"
            );
            let gap = writer
                .write_at(&mut follower, position + 1, &bytes)
                .unwrap_err();
            assert!(matches!(gap, SnapshotError::NotContiguous { .. }), "{gap}");
        }
        writer.write_at(&mut follower, position, &bytes).unwrap();
    }
    // Past the Size: POSITION_OUT_OF_RANGE on the leader side.
    assert!(matches!(
        reader.region(size + 1, 1),
        Err(SnapshotError::PositionOutOfRange { .. })
    ));
    assert_eq!(reader.region(size, 10).unwrap().len_bytes, 0);
    reader.close(&mut leader).unwrap();
    let contents = writer.freeze(&mut follower).unwrap();
    assert_eq!(loaded_records(&contents), input);
    follower.crash();
    let (loaded, _) = latest_valid_snapshot(&mut follower, Path::new(DIR)).unwrap();
    assert_eq!(loaded.unwrap().snapshot_id, id);
}

#[test]
fn raw_writer_refuses_bytes_past_size_and_freeze_before_complete() {
    let mut io = MemoryIo::with_seed(6);
    let id = SnapshotId {
        end_offset: 1,
        epoch: 1,
    };
    let mut writer = RawSnapshotWriter::create(&mut io, Path::new(DIR), id, 10, false).unwrap();
    let error = writer.write_at(&mut io, 0, &[0; 11]).unwrap_err();
    assert!(
        matches!(error, SnapshotError::SizeMismatch { .. }),
        "{error}"
    );
    writer.write_at(&mut io, 0, &[0; 5]).unwrap();
    let error = writer.freeze(&mut io).unwrap_err();
    assert!(
        matches!(error, SnapshotError::SizeMismatch { .. }),
        "{error}"
    );
}

// Bytes that are not a snapshot (all there, right size) are refused at freeze: the .part is
// removed and nothing is frozen.
#[test]
fn raw_writer_validates_before_freezing() {
    let mut io = MemoryIo::with_seed(7);
    let id = SnapshotId {
        end_offset: 1,
        epoch: 1,
    };
    let mut writer = RawSnapshotWriter::create(&mut io, Path::new(DIR), id, 100, false).unwrap();
    writer.write_at(&mut io, 0, &[0xAB; 100]).unwrap();
    let error = writer.freeze(&mut io).unwrap_err();
    assert!(error.is_corruption(), "{error}");
    let listing = list_snapshots(&mut io, Path::new(DIR)).unwrap();
    assert!(listing.frozen.is_empty() && listing.partial.is_empty());
}

// A fetch interrupted by a restart can resume: the .part is kept and its size is the Position.
#[test]
fn partial_fetch_is_resumed_or_removed_at_start() {
    let mut leader = MemoryIo::with_seed(8);
    let id = SnapshotId {
        end_offset: 50,
        epoch: 3,
    };
    write(&mut leader, id, &records(500, 2));
    let bytes = leader
        .visible_bytes(&naming::checkpoint_path(Path::new(DIR), id))
        .unwrap();

    let mut follower = MemoryIo::with_seed(9);
    let mut writer =
        RawSnapshotWriter::create(&mut follower, Path::new(DIR), id, bytes.len() as u64, false)
            .unwrap();
    let half = bytes.len() / 2;
    writer.write_at(&mut follower, 0, &bytes[..half]).unwrap();
    drop(writer); // the process stops; the file is not closed, so restart from the durable image
    let disk = follower.snapshot();

    let mut restarted = MemoryIo::from_snapshot(&disk, Default::default());
    let report = recover_snapshot_dir(&mut restarted, Path::new(DIR), PartPolicy::Keep).unwrap();
    assert_eq!(report.kept_parts.len(), 1);
    let (kept_id, _, held) = report.kept_parts[0].clone();
    assert_eq!(kept_id, id);
    // Unsynced bytes are not promised: resume from whatever survived.
    let mut writer =
        RawSnapshotWriter::create(&mut restarted, Path::new(DIR), id, bytes.len() as u64, true)
            .unwrap();
    assert_eq!(writer.position(), held);
    let position = writer.position() as usize;
    writer
        .write_at(&mut restarted, position as u64, &bytes[position..])
        .unwrap();
    writer.freeze(&mut restarted).unwrap();

    let mut removed = MemoryIo::from_snapshot(&disk, Default::default());
    let report = recover_snapshot_dir(&mut removed, Path::new(DIR), PartPolicy::Remove).unwrap();
    assert!(report.kept_parts.is_empty());
    assert!(
        list_snapshots(&mut removed, Path::new(DIR))
            .unwrap()
            .partial
            .is_empty()
    );
}

// Kafka as shipped names snapshots <20 digits>-<10 digits>.checkpoint in the partition folder:
// ringlog recognises and loads them, and never writes that form.
#[test]
fn kafka_shipped_name_is_recognised_and_loaded() {
    let mut io = MemoryIo::with_seed(10);
    let id = SnapshotId {
        end_offset: 42,
        epoch: 7,
    };
    // Encode with the engine's encoder, then place the bytes under Kafka's shipped name.
    let mut encoder = SnapshotEncoder::new(id, &format(), 5);
    encoder.append_record(Some(b"a"), Some(b"1"));
    let bytes: Bytes = encoder.finish();
    let kafka_path = Path::new(DIR).join("00000000000000000042-0000000007.checkpoint");
    put_file(&mut io, &kafka_path, &bytes);
    let listing = list_snapshots(&mut io, Path::new(DIR)).unwrap();
    assert_eq!(listing.frozen.len(), 1);
    assert_eq!(listing.frozen[0].naming, SnapshotNaming::KafkaShipped);
    assert_eq!(listing.frozen[0].state, SnapshotFileState::Frozen);
    let (contents, _) = latest_valid_snapshot(&mut io, Path::new(DIR)).unwrap();
    let contents = contents.unwrap();
    assert_eq!(
        (contents.snapshot_id, contents.path.clone()),
        (id, kafka_path.clone())
    );
    let raw = RawSnapshotReader::open(&mut io, Path::new(DIR), id).unwrap();
    assert_eq!(raw.size_bytes(), bytes.len() as u64);
    raw.close(&mut io).unwrap();
    // Deleting it goes through its own .deleted name in the same folder.
    let deleted = delete_snapshots_before(
        &mut io,
        Path::new(DIR),
        SnapshotId {
            end_offset: 43,
            epoch: 0,
        },
    )
    .unwrap();
    assert_eq!(deleted, vec![id]);
    assert!(!io.exists(&kafka_path));
    assert!(
        list_snapshots(&mut io, Path::new(DIR))
            .unwrap()
            .frozen
            .is_empty()
    );
}

// KIP-630 "When to Delete Snapshots": every snapshot older than the kept one goes.
#[test]
fn delete_before_keeps_the_given_and_newer() {
    let mut io = MemoryIo::with_seed(11);
    let ids: Vec<SnapshotId> = [(10, 1), (20, 1), (20, 2), (30, 2)]
        .into_iter()
        .map(|(end_offset, epoch)| SnapshotId { end_offset, epoch })
        .collect();
    for id in &ids {
        write(&mut io, *id, &records(2, 1));
    }
    let deleted = delete_snapshots_before(&mut io, Path::new(DIR), ids[2]).unwrap();
    assert_eq!(deleted, ids[..2].to_vec());
    io.crash();
    let listing = list_snapshots(&mut io, Path::new(DIR)).unwrap();
    let left: Vec<SnapshotId> = listing.frozen.iter().map(|f| f.snapshot_id).collect();
    assert_eq!(left, ids[2..].to_vec());
    assert!(listing.deleted.is_empty());
}

// The newest valid snapshot wins; a corrupt newer one is skipped and reported, not loaded.
#[test]
fn corrupt_newest_falls_back_to_the_older_one() {
    let mut io = MemoryIo::with_seed(12);
    let old = SnapshotId {
        end_offset: 10,
        epoch: 1,
    };
    let new = SnapshotId {
        end_offset: 20,
        epoch: 1,
    };
    write(&mut io, old, &records(10, 1));
    let new_path = write(&mut io, new, &records(10, 2));
    io.flip_bit(&new_path, 200, 3).unwrap();
    let (contents, skipped) = latest_valid_snapshot(&mut io, Path::new(DIR)).unwrap();
    assert_eq!(contents.unwrap().snapshot_id, old);
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].0, new);
    assert!(skipped[0].1.is_corruption());
    assert!(
        skipped[0]
            .1
            .to_string()
            .contains(new_path.to_str().unwrap())
    );
}

#[test]
fn structure_errors_name_the_position() {
    let id = SnapshotId {
        end_offset: 1,
        epoch: 0,
    };
    let mut encoder = SnapshotEncoder::new(id, &format(), 0);
    encoder.append_record(Some(b"k"), Some(b"v"));
    let full = encoder.finish();
    // Drop the footer batch: the last batch is now a data batch.
    let batches: Vec<_> = ringlog_engine::batch::batches(&full)
        .map(|b| b.unwrap())
        .collect();
    assert_eq!(batches.len(), 3);
    let without_footer = full.slice(..full.len() - batches[2].size_bytes());
    let error =
        ringlog_engine::snapshot::validate_snapshot_bytes(Path::new("/x"), id, without_footer)
            .unwrap_err();
    assert!(
        matches!(
            error,
            SnapshotError::Structure { reason: StructureError::LastBatchNotFooter, position, .. } if position == batches[1].position()
        ),
        "{error}"
    );
    // Drop the header: offsets no longer start at 0.
    let without_header = full.slice(batches[0].size_bytes()..);
    let error =
        ringlog_engine::snapshot::validate_snapshot_bytes(Path::new("/x"), id, without_header)
            .unwrap_err();
    assert!(
        error.is_corruption() && error.position() == Some(0),
        "{error}"
    );
    // The wrong epoch for the file name.
    let error = ringlog_engine::snapshot::validate_snapshot_bytes(
        Path::new("/x"),
        SnapshotId {
            end_offset: 1,
            epoch: 5,
        },
        full.clone(),
    )
    .unwrap_err();
    assert!(error.is_corruption(), "{error}");
}

// Kafka (kraft.version 1) writes KRaftVersion (and Voters) records in the header's batch, after
// the SnapshotHeader, and the footer in a batch of its own: such a snapshot loads.
#[test]
fn kafka_style_header_batch_with_kraft_version_loads() {
    use ringlog_engine::batch::RecordBatchBuilder;
    use ringlog_engine::batch::control::{
        ControlRecord, ControlRecordKey, ControlRecordType, SnapshotFooterRecord,
        SnapshotHeaderRecord, build_control_batch, build_snapshot_footer_batch,
    };
    let id = SnapshotId {
        end_offset: 9,
        epoch: 4,
    };
    let header = build_control_batch(
        0,
        4,
        0,
        &[
            ControlRecord::SnapshotHeader(SnapshotHeaderRecord::new(0)),
            ControlRecord::Other {
                key: ControlRecordKey::new(ControlRecordType::KRaftVersion),
                value: Some(Bytes::from_static(&[0, 0, 0, 1, 0])),
            },
        ],
    );
    let mut data = RecordBatchBuilder::new(header.next_offset()).with_leader_epoch(4);
    data.append(0, Some(b"k"), Some(b"v"), &[]);
    let data = data.build();
    let footer =
        build_snapshot_footer_batch(data.next_offset(), 4, 0, &SnapshotFooterRecord::new());
    let mut bytes = Vec::new();
    for batch in [&header, &data, &footer] {
        bytes.extend_from_slice(batch.as_bytes());
    }
    let contents = ringlog_engine::snapshot::validate_snapshot_bytes(
        Path::new("/k"),
        id,
        Bytes::from(bytes.clone()),
    )
    .unwrap();
    assert_eq!(contents.records_count, 1);
    assert_eq!(
        contents.format, None,
        "Kafka does not name a ringlog format"
    );
    assert_eq!(
        contents.header_control_records,
        vec![(
            ControlRecordType::KRaftVersion,
            Some(Bytes::from_static(&[0, 0, 0, 1, 0]))
        )],
        "the KRaftVersion record after the header is returned to the caller"
    );
    // A second SnapshotHeader in that batch is misplaced.
    let twice = build_control_batch(
        0,
        4,
        0,
        &[
            ControlRecord::SnapshotHeader(SnapshotHeaderRecord::new(0)),
            ControlRecord::SnapshotHeader(SnapshotHeaderRecord::new(0)),
        ],
    );
    let mut bad = twice.as_bytes().to_vec();
    let data = data.into_stamped(twice.next_offset(), 4);
    bad.extend_from_slice(data.as_bytes());
    bad.extend_from_slice(
        build_snapshot_footer_batch(data.next_offset(), 4, 0, &SnapshotFooterRecord::new())
            .as_bytes(),
    );
    let error =
        ringlog_engine::snapshot::validate_snapshot_bytes(Path::new("/k"), id, Bytes::from(bad))
            .unwrap_err();
    assert!(
        matches!(
            error,
            SnapshotError::Structure {
                reason: StructureError::MisplacedControlRecord,
                position: 0,
                ..
            }
        ),
        "{error}"
    );
}

// KIP-853: a snapshot written here carries the voter set in force at its end offset as a
// Voters control record in the header's batch (Kafka's layout); the reader returns it beside the
// state machine's records, which do not include it.
#[test]
fn header_records_written_with_the_snapshot_load_back() {
    use ringlog_engine::batch::control::ControlRecordType;
    use ringlog_engine::snapshot::write_snapshot_with_header_records;
    let mut io = MemoryIo::with_seed(11);
    let id = SnapshotId {
        end_offset: 30,
        epoch: 2,
    };
    let voters = Bytes::from_static(b"a voters record value");
    let path = write_snapshot_with_header_records(
        &mut io,
        Path::new(DIR),
        id,
        &format(),
        0,
        &[(ControlRecordType::KRaftVoters, voters.clone())],
        |sink| sink.append_record(Some(b"k"), Some(b"v")),
    )
    .unwrap();
    let contents =
        ringlog_engine::snapshot::read_snapshot(&mut io, &path, id).expect("valid snapshot");
    assert_eq!(
        contents.header_control_records,
        vec![(ControlRecordType::KRaftVoters, Some(voters))]
    );
    assert_eq!(contents.records_count, 1);
    assert_eq!(
        loaded_records(&contents),
        vec![(b"k".to_vec(), Some(b"v".to_vec()))]
    );
    assert_eq!(contents.format, Some(format()));
    // Without header records, none come back.
    let plain = write(
        &mut io,
        SnapshotId {
            end_offset: 40,
            epoch: 2,
        },
        &records(2, 1),
    );
    let contents = ringlog_engine::snapshot::read_snapshot(
        &mut io,
        &plain,
        SnapshotId {
            end_offset: 40,
            epoch: 2,
        },
    )
    .unwrap();
    assert!(contents.header_control_records.is_empty());
}
