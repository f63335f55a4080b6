//! The quorum-state file written without blocking the caller, through the ring like a log
//! flush, so an event loop goes on serving while it runs.
//!
//! Why: under write load, each sync waits for the filesystem journal, behind the segments'
//! fdatasyncs. Done synchronously on the node's only thread that was 1.5 to 7 s per vote or
//! epoch change, every partition stalled meanwhile (docs/benchmarks.md, issue 16).
//!
//! **In place** (since 2026-12-07), when the file holds its two copies in slots
//! ([`QuorumStateData::slot_bytes_of_file`]) and the new copy fits: one chain writes the first
//! slot, fdatasyncs, writes the second, fdatasyncs. A crash leaves the first slot new (then
//! it is read: [`QuorumStateData::decode`] reads the first copy that passes its checksum) or
//! torn with the second still the old state, never both damaged. No file is created, renamed
//! or freed: the replace below created an inode, freed the old one (a discard where the
//! filesystem discards) and wrote the folder twice, every vote and every epoch change, on the
//! caller's thread for the creation (docs/benchmarks.md, "New partitions' folders off the
//! loop").
//!
//! **Replaced** otherwise (no file yet, the layout before, a state that outgrew its slot): the
//! same steps as [`QuorumStateData::persist`] (write `quorum-state.tmp`, fdatasync it, rename
//! it over `quorum-state`, fsync the folder), both syncs through the ring.
//!
//! One write is in flight at a time, in order: a newer state asked for while one is in flight
//! replaces any still waiting (the file holds one state; the newest wins), so the writes a caller
//! sees complete are in issue order, and a later ticket's completion covers every earlier one.
//!
//! ```text
//!  write(ticket, data) ─► [Writing in place: slot 1 write, fdatasync, slot 2 write, fdatasync]
//!                    │         │ all complete
//!                    │         ▼ durable_ticket = ticket; the queued write (if any) starts
//!                    └──────► [Writing: tmp write + fdatasync, linked]
//!                              │ both complete
//!                              ▼ rename tmp → quorum-state (metadata, synchronous, no sync)
//!                         [SyncingFolder: fsync of the folder]
//!                              │ completes
//!                              ▼ durable_ticket = ticket; the queued write (if any) starts
//! ```
//!
//! Out of space (ENOSPC, EDQUOT while creating or writing the `.tmp`): nothing was renamed, so
//! `quorum-state` still holds the previous state (in place, an overwrite allocates nothing; a
//! failed first slot leaves the second whole). The write is kept (or the newer one asked for
//! meanwhile) and [`QuorumStateWriter::retry`] starts it again once space may have returned;
//! `waiting_for_space` says so until then. What waits for the ticket keeps waiting.

use std::path::{Path, PathBuf};

use crate::io::{Completion, FileId, Io, Op, OpId};
use crate::log::blocking;
use crate::quorum_state::{QuorumStateData, QuorumStateError};

/// Writes one quorum-state file through the ring. See the module doc.
#[derive(Debug)]
pub struct QuorumStateWriter {
    path: PathBuf,
    tmp_path: PathBuf,
    folder: PathBuf,
    stage: Stage,
    /// The newest state asked for while another write was in flight.
    queued: Option<(u64, Vec<u8>)>,
    /// The latest ticket whose state is durable (0: none written by this writer).
    durable_ticket: u64,
    /// The newest state whose write met ENOSPC/EDQUOT, to start again (`retry`).
    waiting_for_space: Option<(u64, Vec<u8>)>,
}

#[derive(Debug)]
enum Stage {
    Idle,
    Writing {
        ticket: u64,
        file: FileId,
        /// The chain's operations not completed yet.
        pending: Vec<OpId>,
        /// The state being written, to write again if the disk is full.
        bytes: Vec<u8>,
        /// Written in place into `quorum-state` itself (durable when the chain completes),
        /// else into the `.tmp` (renamed, then the folder synced).
        in_place: bool,
    },
    SyncingFolder {
        ticket: u64,
        folder: FileId,
        op_id: OpId,
    },
    /// A write that failed, waiting for the rest of its chain (a cancelled fdatasync) before
    /// its file is closed. Its completions may already sit in the caller's queue, so they are
    /// absorbed here rather than waited for.
    Abandoned {
        file: FileId,
        pending: Vec<OpId>,
    },
}

/// What [`QuorumStateWriter::on_completion`] did with a completion.
#[derive(Debug)]
pub enum WriterRouted {
    /// Not ours: handed back for its owner.
    Foreign(Completion),
    /// Ours. `Some(ticket)` when the state of `ticket` (and of every earlier one) became durable.
    Mine { durable_ticket: Option<u64> },
}

impl QuorumStateWriter {
    pub fn new(path: &Path) -> Self {
        QuorumStateWriter {
            path: path.to_path_buf(),
            tmp_path: blocking::tmp_path(path),
            folder: blocking::parent_dir(path).to_path_buf(),
            stage: Stage::Idle,
            queued: None,
            durable_ticket: 0,
            waiting_for_space: None,
        }
    }

    /// Asks for `data` to be written as the state of `ticket` (tickets increase). Starts at once
    /// if nothing is in flight, else replaces what waits.
    pub fn write<I: Io>(
        &mut self,
        io: &mut I,
        ticket: u64,
        data: &QuorumStateData,
    ) -> Result<(), QuorumStateError> {
        assert!(
            ticket > self.durable_ticket && self.queued.as_ref().is_none_or(|(t, _)| ticket > *t),
            "quorum-state tickets must increase"
        );
        let bytes = data.encode_file().into_bytes();
        if self.waiting_for_space.is_some() {
            // The newest state replaces the one waiting; `retry` writes it.
            self.waiting_for_space = Some((ticket, bytes));
        } else if matches!(self.stage, Stage::Idle) {
            self.start(io, ticket, bytes)?;
        } else {
            self.queued = Some((ticket, bytes));
        }
        Ok(())
    }

    /// The latest ticket whose state is durable.
    pub fn durable_ticket(&self) -> u64 {
        self.durable_ticket
    }

    /// Whether a write is in flight or waiting.
    pub fn is_busy(&self) -> bool {
        !matches!(self.stage, Stage::Idle)
            || self.queued.is_some()
            || self.waiting_for_space.is_some()
    }

    /// Whether an operation of the writer is in flight: a completion can be its own only then.
    pub fn awaits_completions(&self) -> bool {
        !matches!(self.stage, Stage::Idle)
    }

    /// Whether a write waits for disk space (it met ENOSPC or EDQUOT).
    pub fn waiting_for_space(&self) -> bool {
        self.waiting_for_space.is_some()
    }

    /// Starts the write that waits for disk space again (space may have returned). A full disk
    /// answers again at its completion, or here.
    pub fn retry<I: Io>(&mut self, io: &mut I) -> Result<(), QuorumStateError> {
        if matches!(self.stage, Stage::Idle)
            && let Some((ticket, bytes)) = self.waiting_for_space.take()
        {
            self.start(io, ticket, bytes)?;
        }
        Ok(())
    }

    /// The operations in flight, for a caller that must wait for them (closing the partition).
    pub fn in_flight_op_ids(&self) -> Vec<OpId> {
        match &self.stage {
            Stage::Idle => Vec::new(),
            Stage::Writing { pending, .. } | Stage::Abandoned { pending, .. } => pending.clone(),
            Stage::SyncingFolder { op_id, .. } => vec![*op_id],
        }
    }

    /// Routes one completion: ours moves the write on (and may start the queued one), anything
    /// else is handed back. An I/O error fails the write; the caller treats it as it treats a
    /// failed log flush (the vote it guards must never leave).
    pub fn on_completion<I: Io>(
        &mut self,
        io: &mut I,
        completion: Completion,
    ) -> Result<WriterRouted, QuorumStateError> {
        match &mut self.stage {
            Stage::Writing {
                ticket,
                file,
                pending,
                bytes,
                in_place,
            } if pending.contains(&completion.op_id) => {
                let (ticket, file, in_place) = (*ticket, *file, *in_place);
                pending.retain(|id| *id != completion.op_id);
                let all = pending.is_empty();
                if let Err(error) = completion.result {
                    let bytes = std::mem::take(bytes);
                    let rest = std::mem::take(pending);
                    let newer = self.queued.take();
                    if rest.is_empty() {
                        self.stage = Stage::Idle;
                        let _ = io.close(file);
                    } else {
                        self.stage = Stage::Abandoned {
                            file,
                            pending: rest,
                        };
                    }
                    if error.is_no_space() {
                        // Only the `.tmp` was touched: write the newest state again later.
                        self.waiting_for_space = Some(newer.unwrap_or((ticket, bytes)));
                    }
                    return Err(error.into());
                }
                if !all {
                    return Ok(WriterRouted::Mine {
                        durable_ticket: None,
                    });
                }
                // A failure from here on leaves nothing in flight (the caller stops on it).
                self.stage = Stage::Idle;
                io.close(file)?;
                if in_place {
                    return Ok(WriterRouted::Mine {
                        durable_ticket: Some(self.durable(io, ticket)?),
                    });
                }
                io.rename(&self.tmp_path, &self.path)?;
                let folder = io.open_dir(&self.folder)?;
                let op_id = io.submit(Op::Fdatasync { file: folder });
                self.stage = Stage::SyncingFolder {
                    ticket,
                    folder,
                    op_id,
                };
                Ok(WriterRouted::Mine {
                    durable_ticket: None,
                })
            }
            Stage::SyncingFolder {
                ticket,
                folder,
                op_id,
            } if *op_id == completion.op_id => {
                let (ticket, folder) = (*ticket, *folder);
                self.stage = Stage::Idle;
                io.close(folder)?;
                completion.result?;
                Ok(WriterRouted::Mine {
                    durable_ticket: Some(self.durable(io, ticket)?),
                })
            }
            Stage::Abandoned { file, pending } if pending.contains(&completion.op_id) => {
                pending.retain(|id| *id != completion.op_id);
                if pending.is_empty() {
                    let file = *file;
                    self.stage = Stage::Idle;
                    io.close(file)?;
                }
                Ok(WriterRouted::Mine {
                    durable_ticket: None,
                })
            }
            _ => Ok(WriterRouted::Foreign(completion)),
        }
    }

    /// The write of `ticket` is durable: the queued one (if any) starts.
    fn durable<I: Io>(&mut self, io: &mut I, ticket: u64) -> Result<u64, QuorumStateError> {
        assert!(
            ticket > self.durable_ticket,
            "writes complete in issue order"
        );
        self.durable_ticket = ticket;
        if let Some((next, bytes)) = self.queued.take() {
            self.start(io, next, bytes)?;
        }
        Ok(ticket)
    }

    /// `quorum-state` opened for a write in place of `bytes` (a whole file's content, two
    /// equal slots), if it holds two slots of the same size; else `None` (it is replaced).
    fn open_in_place<I: Io>(
        &self,
        io: &mut I,
        bytes: &[u8],
    ) -> Result<Option<FileId>, QuorumStateError> {
        if !io.exists(&self.path) {
            return Ok(None);
        }
        let options = crate::io::OpenOptions {
            create: false,
            create_new: false,
            read_only: false,
            direct: false,
        };
        let file = io.open(&self.path, options)?;
        match io.file_size_bytes(file) {
            Ok(len)
                if len == bytes.len() as u64
                    && QuorumStateData::slot_bytes_of_file(len).is_some() =>
            {
                Ok(Some(file))
            }
            other => {
                io.close(file)?;
                other?;
                Ok(None)
            }
        }
    }

    fn start<I: Io>(
        &mut self,
        io: &mut I,
        ticket: u64,
        bytes: Vec<u8>,
    ) -> Result<(), QuorumStateError> {
        if let Some(file) = self.open_in_place(io, &bytes)? {
            let slot = bytes.len() / 2;
            let block = io.block_size_bytes();
            let pending = io.submit_linked(vec![
                Op::Write {
                    file,
                    offset: 0,
                    buf: crate::io::AlignedBuf::from_slice(&bytes[..slot], block),
                },
                Op::Fdatasync { file },
                Op::Write {
                    file,
                    offset: slot as u64,
                    buf: crate::io::AlignedBuf::from_slice(&bytes[slot..], block),
                },
                Op::Fdatasync { file },
            ]);
            self.stage = Stage::Writing {
                ticket,
                file,
                pending,
                bytes,
                in_place: true,
            };
            return Ok(());
        }
        let file = match blocking::open_emptied(io, &self.tmp_path) {
            Ok(file) => file,
            Err(error) => {
                if error.is_no_space() {
                    self.waiting_for_space = Some((ticket, bytes));
                }
                return Err(error.into());
            }
        };
        let pending = blocking::submit_write_and_sync(io, file, &bytes);
        self.stage = Stage::Writing {
            ticket,
            file,
            pending,
            bytes,
            in_place: false,
        };
        Ok(())
    }

    /// Waits for the write in flight and any queued one (a partition being closed). Completions
    /// of other owners stay in the ring.
    pub fn finish_blocking<I: Io>(&mut self, io: &mut I) -> Result<(), QuorumStateError> {
        while self.is_busy() {
            if matches!(self.stage, Stage::Idle)
                && let Some((ticket, bytes)) =
                    self.queued.take().or_else(|| self.waiting_for_space.take())
            {
                self.start(io, ticket, bytes)?;
            }
            let ids = self.in_flight_op_ids();
            for completion in crate::io::wait_for_any(io, &ids)? {
                if let WriterRouted::Foreign(_) = self.on_completion(io, completion)? {
                    unreachable!("wait_for_any returns only the completions asked for");
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemoryIo;
    use crate::quorum_state::QUORUM_STATE_FILE_NAME;

    fn state(epoch: i32) -> QuorumStateData {
        let mut s = QuorumStateData::initial("rl", &[1, 2, 3]);
        s.leader_epoch = epoch;
        s
    }

    /// A state whose copy spans several sectors (200 voters, about 3 KB of its 4 KiB slot),
    /// so a crash can tear a copy in its middle.
    fn large_state(epoch: i32) -> QuorumStateData {
        let voters: Vec<i32> = (1..=200).collect();
        let mut s = QuorumStateData::initial("rl", &voters);
        s.leader_epoch = epoch;
        s
    }

    fn pump(io: &mut MemoryIo, writer: &mut QuorumStateWriter) -> Vec<u64> {
        let mut durable = Vec::new();
        while io.in_flight() > 0 {
            io.submit_and_wait(1).unwrap();
            let mut ready = Vec::new();
            io.drain_completions(&mut ready);
            for c in ready {
                match writer.on_completion(io, c).unwrap() {
                    WriterRouted::Mine {
                        durable_ticket: Some(t),
                    } => durable.push(t),
                    WriterRouted::Mine { .. } => {}
                    WriterRouted::Foreign(c) => panic!("foreign {c:?}"),
                }
            }
        }
        durable
    }

    #[test]
    fn a_write_is_durable_only_after_the_folder_sync_and_the_newest_queued_state_wins() {
        let mut io = MemoryIo::with_seed(3);
        let folder = Path::new("/p");
        io.create_dir_all(folder).unwrap();
        io.sync_dir(Path::new("/")).unwrap();
        let path = folder.join(QUORUM_STATE_FILE_NAME);
        let mut writer = QuorumStateWriter::new(&path);
        writer.write(&mut io, 1, &state(1)).unwrap();
        // Two more while the first is in flight: only the newest is written.
        writer.write(&mut io, 2, &state(2)).unwrap();
        writer.write(&mut io, 3, &state(3)).unwrap();
        assert!(writer.is_busy());
        assert_eq!(
            writer.durable_ticket(),
            0,
            "nothing durable before completions"
        );
        let durable = pump(&mut io, &mut writer);
        assert_eq!(durable, vec![1, 3]);
        assert!(!writer.is_busy());
        io.crash();
        let loaded = QuorumStateData::load(&mut io, &path).unwrap().unwrap();
        assert_eq!(loaded.leader_epoch, 3);
    }

    /// A file of two slots is written in place (one chain of four operations, no `.tmp`); a
    /// crash before the chain completes, whatever it tears (copies that span sectors), leaves
    /// the old state or the new one, never an unreadable file, and the new one once it
    /// completed.
    #[test]
    fn a_write_in_place_survives_a_crash_at_any_point_whole() {
        let mut outcomes = [0usize; 2];
        for seed in 0..200 {
            // Every unsynced write may land torn or whole, in any combination.
            let mut io = MemoryIo::new(crate::io::MemoryConfig {
                seed,
                faults: crate::io::memory::FaultConfig {
                    tear_probability: 0.5,
                    tear_every_unsynced_write: true,
                    writeback_probability: 0.5,
                    ..Default::default()
                },
                ..Default::default()
            });
            let folder = Path::new("/p");
            io.create_dir_all(folder).unwrap();
            io.sync_dir(Path::new("/")).unwrap();
            let path = folder.join(QUORUM_STATE_FILE_NAME);
            large_state(4).persist(&mut io, &path).unwrap();
            let mut writer = QuorumStateWriter::new(&path);
            writer.write(&mut io, 1, &large_state(5)).unwrap();
            assert_eq!(writer.in_flight_op_ids().len(), 4, "in place");
            assert!(!io.exists(&blocking::tmp_path(&path)));
            // Some of the chain completes (none, the first write and its sync, or more).
            let steps = seed as usize % 4;
            if steps > 0 {
                io.submit_and_wait(steps).unwrap();
            }
            let report = io.crash();
            let loaded = QuorumStateData::load(&mut io, &path)
                .unwrap_or_else(|e| panic!("seed {seed} steps {steps}: {e} {report:?}"))
                .unwrap();
            assert!(
                [4, 5].contains(&loaded.leader_epoch),
                "seed {seed}: {loaded:?}"
            );
            outcomes[(loaded.leader_epoch - 4) as usize] += 1;
        }
        assert!(outcomes[0] > 0 && outcomes[1] > 0, "{outcomes:?}");
        // Completed: durable without a folder sync.
        let mut io = MemoryIo::with_seed(1);
        io.create_dir_all(Path::new("/p")).unwrap();
        io.sync_dir(Path::new("/")).unwrap();
        let path = Path::new("/p").join(QUORUM_STATE_FILE_NAME);
        let mut writer = QuorumStateWriter::new(&path);
        writer.write(&mut io, 1, &state(6)).unwrap();
        assert_eq!(writer.in_flight_op_ids().len(), 2, "no file yet: replaced");
        assert_eq!(pump(&mut io, &mut writer), vec![1]);
        writer.write(&mut io, 2, &state(7)).unwrap();
        assert_eq!(writer.in_flight_op_ids().len(), 4, "then in place");
        assert_eq!(pump(&mut io, &mut writer), vec![2]);
        io.crash();
        let loaded = QuorumStateData::load(&mut io, &path).unwrap().unwrap();
        assert_eq!(loaded.leader_epoch, 7);
    }

    /// ENOSPC on the `.tmp`: the previous state stays whole, the write waits (the newest state
    /// asked for meanwhile replaces it) and `retry` makes it durable once space returned.
    #[test]
    fn a_write_out_of_space_waits_and_a_retry_makes_the_newest_state_durable() {
        use crate::io::memory::{FaultKind, FaultTrigger};
        let mut io = MemoryIo::with_seed(7);
        let folder = Path::new("/p");
        io.create_dir_all(folder).unwrap();
        io.sync_dir(Path::new("/")).unwrap();
        let path = folder.join(QUORUM_STATE_FILE_NAME);
        state(4).persist(&mut io, &path).unwrap();
        let mut writer = QuorumStateWriter::new(&path);
        io.add_fault(FaultTrigger::always(FaultKind::WriteEnospc));
        writer.write(&mut io, 1, &state(5)).unwrap();
        io.submit_and_wait(2).unwrap();
        let mut ready = Vec::new();
        io.drain_completions(&mut ready);
        let errors: Vec<_> = ready
            .into_iter()
            .filter_map(|c| writer.on_completion(&mut io, c).err())
            .collect();
        assert!(
            matches!(&errors[..], [QuorumStateError::Io(e)] if e.is_no_space()),
            "{errors:?}"
        );
        assert!(writer.waiting_for_space());
        writer.write(&mut io, 2, &state(6)).unwrap();
        assert_eq!(io.in_flight(), 0, "nothing starts while the disk is full");
        assert_eq!(
            QuorumStateData::load(&mut io, &path)
                .unwrap()
                .unwrap()
                .leader_epoch,
            4
        );

        io.clear_faults();
        writer.retry(&mut io).unwrap();
        assert_eq!(pump(&mut io, &mut writer), vec![2]);
        assert!(!writer.waiting_for_space());
        io.crash();
        let loaded = QuorumStateData::load(&mut io, &path).unwrap().unwrap();
        assert_eq!(loaded.leader_epoch, 6);
    }
}
