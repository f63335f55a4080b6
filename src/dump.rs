//! `ringlog dump`: a segment or snapshot file printed batch by batch (like kafka-dump-log),
//! control records decoded, records' keys and values with `--print-records`.

use std::path::Path;

use bytes::Bytes;
use ringlog_engine::batch::BatchIter;

/// `ringlog dump --print-records` of a control batch: each control record by its KIP name,
/// with the KRaft ones decoded (kraft.version, the voter set with its directory ids).
fn print_control_records(batch: &ringlog_engine::batch::RecordBatch) {
    use ringlog_engine::batch::control::{ControlRecord, ControlRecordType};
    let records = match batch.control_records() {
        Ok(records) => records,
        Err(e) => {
            println!("| control records not readable: {e}");
            return;
        }
    };
    for record in records {
        let (offset, record) = match record {
            Ok(found) => found,
            Err(e) => {
                println!("| bad control record: {e}");
                return;
            }
        };
        let text = match &record {
            ControlRecord::LeaderChange(m) => format!(
                "LeaderChange leaderId: {} voters: {:?} grantingVoters: {:?}",
                m.leader_id, m.voters, m.granting_voters
            ),
            ControlRecord::SnapshotHeader(_) => "SnapshotHeader".to_string(),
            ControlRecord::SnapshotFooter(_) => "SnapshotFooter".to_string(),
            ControlRecord::Other { key, value } => {
                let value = value.as_deref().unwrap_or_default();
                match key.record_type {
                    ControlRecordType::KRaftVersion => {
                        match ringlog_replication::voters::decode_kraft_version_record(value) {
                            Ok(version) => format!("KRaftVersion kraft.version: {version}"),
                            Err(e) => format!("KRaftVersion (malformed: {e})"),
                        }
                    }
                    ControlRecordType::KRaftVoters => {
                        match ringlog_replication::voters::VoterSet::decode_record_value(value) {
                            Ok(voters) => format!(
                                "KRaftVoters voters: [{}]",
                                voters
                                    .voters()
                                    .iter()
                                    .map(|(id, info)| format!(
                                        "{id} (directory {})",
                                        ringlog_net::meta_properties::uuid_text(&info.directory_id)
                                    ))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                            Err(e) => format!("KRaftVoters (malformed: {e})"),
                        }
                    }
                    ControlRecordType::ProducerState => {
                        // ringlog's own: the producer state a snapshot carries (docs/snapshots.md).
                        match ringlog_net::node::producer_state_file::decode(value) {
                            Ok(state) => format!(
                                "ProducerState offset: {} batches: [{}]",
                                state.offset,
                                state
                                    .batches
                                    .iter()
                                    .map(|b| format!(
                                        "producerId {} epoch {} sequences {}..={} offsets {}..={}",
                                        b.producer_id,
                                        b.producer_epoch,
                                        b.base_sequence,
                                        b.last_sequence,
                                        b.base_offset,
                                        b.last_offset
                                    ))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                            Err(e) => format!("ProducerState (malformed: {e})"),
                        }
                    }
                    other => format!("{other:?}"),
                }
            }
        };
        println!("| offset: {offset} control: {text}");
    }
}

pub(crate) fn dump(file: &Path, print_records: bool) -> Result<(), String> {
    let error = |e: std::io::Error| format!("{}: {e}", file.display());
    // A segment file ends with its slot region (docs/log.md): read the batches up to the newest
    // slot's mark (with the slot's partial last block), not the sparse space up to the region.
    let segment = if file.extension().is_some_and(|extension| extension == "log") {
        ringlog_engine::log::read_segment_data(file).map_err(error)?
    } else {
        None
    };
    println!("Dumping {}", file.display());
    let bytes = match segment {
        Some((end, data)) => {
            println!(
                "(segment: slot region at byte {}, block size {}, newest slot {} marks the batches' end at byte {})",
                end.region_offset, end.block_size_bytes, end.newest_slot_sequence, end.durable_mark
            );
            data
        }
        None => std::fs::read(file).map_err(error)?,
    };
    let bytes = Bytes::from(bytes);
    let mut batches = BatchIter::new(bytes.clone());
    let mut count = 0u64;
    loop {
        match batches.next() {
            None => break,
            Some(Ok(batch)) => {
                count += 1;
                let header = batch.header();
                println!(
                    "baseOffset: {} lastOffset: {} count: {} partitionLeaderEpoch: {} isControl: {} position: {} size: {} compresscodec: {} crc: {:#010x} crcValid: true",
                    batch.base_offset(),
                    batch.last_offset(),
                    batch.records_count(),
                    batch.partition_leader_epoch(),
                    batch.is_control(),
                    batch.position(),
                    batch.size_bytes(),
                    ringlog_engine::batch::compression::codec_name(batch.compression()),
                    header.crc(),
                );
                if print_records && batch.is_control() {
                    print_control_records(&batch);
                }
                if print_records && !batch.is_control() {
                    match batch.records() {
                        Ok(records) => {
                            for record in records {
                                match record {
                                    Ok(r) => println!(
                                        "| offset: {} key: {} value: {}",
                                        r.offset(),
                                        r.key()
                                            .map_or("null".into(), |k| String::from_utf8_lossy(k)
                                                .into_owned()),
                                        r.value()
                                            .map_or("null".into(), |v| String::from_utf8_lossy(v)
                                                .into_owned()),
                                    ),
                                    Err(e) => {
                                        println!("| bad record: {e}");
                                        break;
                                    }
                                }
                            }
                        }
                        Err(e) => println!("| records not readable: {e}"),
                    }
                }
            }
            Some(Err(error)) => {
                let at = batches.valid_bytes();
                if bytes[at..].iter().all(|b| *b == 0) {
                    println!(
                        "({} zero bytes of preallocated space after the last batch)",
                        bytes.len() - at
                    );
                } else {
                    println!("stopped at byte {at}: {error}");
                }
                break;
            }
        }
    }
    println!("{count} batches");
    Ok(())
}

// ---- consume (produce: produce.rs) ---------------------------------------------------------
