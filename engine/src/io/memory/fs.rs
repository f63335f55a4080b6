//! The simulated filesystem: inodes with a visible and a durable image.
//!
//! Files and directories are inodes. A file inode holds the bytes readers see now (`visible`, the
//! page cache) and the bytes on the medium (`durable`). A directory inode holds its entries twice
//! the same way: `visible` (what lookups see) and `durable` (what a crash leaves), and only
//! `sync_dir` copies one to the other. So creating, renaming or removing a file changes only
//! visible entries, exactly the window a real crash exposes. After a crash every inode that is no
//! longer reachable from the root through durable entries is gone.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use super::fault::SimRng;
use crate::io::common::errno;

pub(crate) type InodeId = u64;
pub(crate) const ROOT: InodeId = 0;

#[derive(Clone, Debug)]
pub(crate) enum Inode {
    File(FileData),
    Dir(DirData),
}

#[derive(Clone, Debug, Default)]
pub(crate) struct FileData {
    pub visible: Vec<u8>,
    pub durable: Vec<u8>,
    /// Writes that completed since the last successful fdatasync, oldest first: what a crash may
    /// tear or let through, and the dirty ranges fdatasync copies.
    pub unsynced_writes: Vec<UnsyncedWrite>,
    /// The smallest visible length since the last fdatasync: bytes from here on may differ
    /// from the durable image (a truncate then an extend leaves zeros where old data was).
    pub min_len_since_sync: usize,
    /// Byte ranges whose dirty data a failed fdatasync dropped: they read back from the cache but
    /// reach the medium as zeros, until rewritten (or a crash resets the cache).
    pub lost_ranges: Vec<(usize, usize)>,
}

#[derive(Clone, Debug)]
pub(crate) struct UnsyncedWrite {
    pub offset: u64,
    pub data: Vec<u8>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct DirData {
    pub visible: BTreeMap<String, InodeId>,
    pub durable: BTreeMap<String, InodeId>,
}

/// What a crash did to one write it did not simply drop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornWrite {
    pub path: PathBuf,
    pub offset: u64,
    pub len_bytes: usize,
    /// How many leading bytes of the write reached the medium (`len_bytes`: all of it, by writeback).
    pub applied_bytes: usize,
}

/// A write a crash may let through or tear, with the path it was issued on (for the report).
pub(crate) struct CrashCandidate {
    pub inode: InodeId,
    pub path: PathBuf,
    pub offset: u64,
    pub data: Vec<u8>,
}

#[derive(Clone, Debug)]
pub(crate) struct Fs {
    pub inodes: BTreeMap<InodeId, Inode>,
    next_inode: InodeId,
}

/// Split a path into its names, resolving `.` and `..` lexically. The memory filesystem has one
/// root; relative paths are taken from it.
pub(crate) fn components(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(name) => names.push(name.to_string_lossy().into_owned()),
            Component::ParentDir => {
                names.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    names
}

/// The canonical form of a path in this filesystem (absolute, no `.`/`..`).
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    out.extend(components(path));
    out
}

impl Fs {
    pub fn new() -> Self {
        let mut inodes = BTreeMap::new();
        inodes.insert(ROOT, Inode::Dir(DirData::default()));
        Fs {
            inodes,
            next_inode: ROOT + 1,
        }
    }

    pub fn file(&self, inode: InodeId) -> Option<&FileData> {
        match self.inodes.get(&inode) {
            Some(Inode::File(f)) => Some(f),
            _ => None,
        }
    }

    pub fn file_mut(&mut self, inode: InodeId) -> Option<&mut FileData> {
        match self.inodes.get_mut(&inode) {
            Some(Inode::File(f)) => Some(f),
            _ => None,
        }
    }

    fn dir(&self, inode: InodeId) -> Option<&DirData> {
        match self.inodes.get(&inode) {
            Some(Inode::Dir(d)) => Some(d),
            _ => None,
        }
    }

    fn dir_mut(&mut self, inode: InodeId) -> Option<&mut DirData> {
        match self.inodes.get_mut(&inode) {
            Some(Inode::Dir(d)) => Some(d),
            _ => None,
        }
    }

    /// Follow `names` from the root through visible (or durable) entries.
    pub fn lookup(&self, names: &[String], durable: bool) -> Option<InodeId> {
        let mut at = ROOT;
        for name in names {
            let dir = self.dir(at)?;
            let entries = if durable { &dir.durable } else { &dir.visible };
            at = *entries.get(name)?;
        }
        Some(at)
    }

    /// The directory inode holding the last name of `names`, and that name.
    pub fn parent_of(&self, names: &[String]) -> Result<(InodeId, String), std::io::Error> {
        let (last, parents) = names.split_last().ok_or_else(|| errno(libc::EINVAL))?;
        let parent = self
            .lookup(parents, false)
            .ok_or_else(|| errno(libc::ENOENT))?;
        if self.dir(parent).is_none() {
            return Err(errno(libc::ENOTDIR));
        }
        Ok((parent, last.clone()))
    }

    pub fn is_dir(&self, inode: InodeId) -> bool {
        self.dir(inode).is_some()
    }

    pub fn new_file(&mut self, parent: InodeId, name: String) -> InodeId {
        let id = self.allocate(Inode::File(FileData::default()));
        self.dir_mut(parent)
            .expect("parent is a directory")
            .visible
            .insert(name, id);
        id
    }

    fn allocate(&mut self, inode: Inode) -> InodeId {
        let id = self.next_inode;
        self.next_inode += 1;
        self.inodes.insert(id, inode);
        id
    }

    pub fn create_dir_all(&mut self, names: &[String]) -> Result<(), std::io::Error> {
        let mut at = ROOT;
        for name in names {
            let existing = self
                .dir(at)
                .ok_or_else(|| errno(libc::ENOTDIR))?
                .visible
                .get(name)
                .copied();
            at = match existing {
                Some(child) => child,
                None => {
                    let child = self.allocate(Inode::Dir(DirData::default()));
                    self.dir_mut(at)
                        .expect("checked above")
                        .visible
                        .insert(name.clone(), child);
                    child
                }
            };
        }
        if self.is_dir(at) {
            Ok(())
        } else {
            Err(errno(libc::ENOTDIR))
        }
    }

    pub fn list_dir(&self, names: &[String]) -> Result<Vec<String>, std::io::Error> {
        let inode = self
            .lookup(names, false)
            .ok_or_else(|| errno(libc::ENOENT))?;
        let dir = self.dir(inode).ok_or_else(|| errno(libc::ENOTDIR))?;
        Ok(dir.visible.keys().cloned().collect())
    }

    pub fn rename(&mut self, from: &[String], to: &[String]) -> Result<(), std::io::Error> {
        let (from_parent, from_name) = self.parent_of(from)?;
        let (to_parent, to_name) = self.parent_of(to)?;
        let moving = *self
            .dir(from_parent)
            .expect("parent")
            .visible
            .get(&from_name)
            .ok_or_else(|| errno(libc::ENOENT))?;
        if to.starts_with(from) && to.len() > from.len() {
            // Moving a directory into itself.
            return Err(errno(libc::EINVAL));
        }
        if let Some(&replaced) = self.dir(to_parent).expect("parent").visible.get(&to_name) {
            if replaced == moving {
                return Ok(());
            }
            match (self.is_dir(moving), self.is_dir(replaced)) {
                (false, true) => return Err(errno(libc::EISDIR)),
                (true, false) => return Err(errno(libc::ENOTDIR)),
                (true, true) if !self.dir(replaced).expect("dir").visible.is_empty() => {
                    return Err(errno(libc::ENOTEMPTY));
                }
                _ => {}
            }
        }
        self.dir_mut(from_parent)
            .expect("parent")
            .visible
            .remove(&from_name);
        self.dir_mut(to_parent)
            .expect("parent")
            .visible
            .insert(to_name, moving);
        Ok(())
    }

    pub fn remove_file(&mut self, names: &[String]) -> Result<(), std::io::Error> {
        let (parent, name) = self.parent_of(names)?;
        let inode = *self
            .dir(parent)
            .expect("parent")
            .visible
            .get(&name)
            .ok_or_else(|| errno(libc::ENOENT))?;
        if self.is_dir(inode) {
            return Err(errno(libc::EISDIR));
        }
        self.dir_mut(parent).expect("parent").visible.remove(&name);
        Ok(())
    }

    pub fn sync_dir(&mut self, names: &[String]) -> Result<(), std::io::Error> {
        let inode = self
            .lookup(names, false)
            .ok_or_else(|| errno(libc::ENOENT))?;
        self.sync_dir_inode(inode)
    }

    /// `sync_dir` of an open directory handle.
    pub fn sync_dir_inode(&mut self, inode: InodeId) -> Result<(), std::io::Error> {
        let dir = self.dir_mut(inode).ok_or_else(|| errno(libc::ENOTDIR))?;
        dir.durable = dir.visible.clone();
        Ok(())
    }

    /// Drop everything that is not durable. `candidates` are the writes not covered by a completed
    /// fdatasync (oldest first, per file); each may reach the medium in full (writeback) and the
    /// newest of each file (each of them, with `tear_every`) may land torn, as the
    /// probabilities say.
    pub fn crash(
        &mut self,
        candidates: Vec<CrashCandidate>,
        rng: &mut SimRng,
        tear_probability: f64,
        writeback_probability: f64,
        tear_every: bool,
    ) -> Vec<TornWrite> {
        let mut report = Vec::new();
        let mut newest: BTreeMap<InodeId, usize> = BTreeMap::new();
        for (index, candidate) in candidates.iter().enumerate() {
            newest.insert(candidate.inode, index);
        }
        for (index, candidate) in candidates.into_iter().enumerate() {
            let Some(file) = self.file_mut(candidate.inode) else {
                continue;
            };
            let len_bytes = candidate.data.len();
            let applied_bytes = if (tear_every || newest.get(&candidate.inode) == Some(&index))
                && rng.chance(tear_probability)
            {
                // Any byte, not only a sector boundary: the model must be at least as hostile
                // as a drive without atomic sector writes.
                if len_bytes == 0 {
                    0
                } else {
                    rng.below(len_bytes as u64) as usize
                }
            } else if rng.chance(writeback_probability) {
                len_bytes
            } else {
                continue;
            };
            if applied_bytes == 0 && len_bytes > 0 {
                // Nothing landed: record it anyway, the cut fell at byte 0.
                report.push(TornWrite {
                    path: candidate.path,
                    offset: candidate.offset,
                    len_bytes,
                    applied_bytes,
                });
                continue;
            }
            apply_at(
                &mut file.durable,
                candidate.offset,
                &candidate.data[..applied_bytes],
            );
            report.push(TornWrite {
                path: candidate.path,
                offset: candidate.offset,
                len_bytes,
                applied_bytes,
            });
        }
        for inode in self.inodes.values_mut() {
            match inode {
                Inode::File(f) => {
                    f.visible = f.durable.clone();
                    f.unsynced_writes.clear();
                    f.lost_ranges.clear();
                    f.min_len_since_sync = f.visible.len();
                }
                Inode::Dir(d) => d.visible = d.durable.clone(),
            }
        }
        self.collect_unreachable();
        report
    }

    /// Remove inodes that no durable entry reaches from the root.
    fn collect_unreachable(&mut self) {
        let mut reachable = std::collections::BTreeSet::new();
        let mut stack = vec![ROOT];
        while let Some(at) = stack.pop() {
            if !reachable.insert(at) {
                continue;
            }
            if let Some(dir) = self.dir(at) {
                stack.extend(dir.durable.values().copied());
            }
        }
        self.inodes.retain(|id, _| reachable.contains(id));
    }

    /// Every regular file reachable through durable (or visible) entries, as absolute paths.
    pub fn file_paths(&self, durable: bool) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut stack = vec![(ROOT, PathBuf::from("/"))];
        while let Some((at, path)) = stack.pop() {
            match self.inodes.get(&at) {
                Some(Inode::Dir(d)) => {
                    let entries = if durable { &d.durable } else { &d.visible };
                    for (name, child) in entries {
                        stack.push((*child, path.join(name)));
                    }
                }
                Some(Inode::File(_)) => out.push(path),
                None => {}
            }
        }
        out.sort();
        out
    }
}

impl FileData {
    /// Write `data` at `offset` into the visible image, growing it with zeros if needed.
    pub fn write_visible(&mut self, offset: u64, data: &[u8]) {
        apply_at(&mut self.visible, offset, data);
        // A rewrite of a whole lost range makes its pages dirty again: the next sync carries them.
        let end = offset as usize + data.len();
        self.lost_ranges
            .retain(|&(s, e)| !(offset as usize <= s && e <= end));
        self.unsynced_writes.push(UnsyncedWrite {
            offset,
            data: data.to_vec(),
        });
    }

    /// A `WriteDsync`: visible, and its own range on the medium when it completes (the file's
    /// durable image grows to the write's end, zero filled; no other write is carried). The
    /// unsynced writes it covers entirely are dropped: the page cache holds these bytes now, so
    /// a crash can never land the older ones over them.
    pub fn write_durable(&mut self, offset: u64, data: &[u8]) {
        let end = offset as usize + data.len();
        apply_at(&mut self.visible, offset, data);
        self.lost_ranges
            .retain(|&(s, e)| !(offset as usize <= s && e <= end));
        self.unsynced_writes.retain(|write| {
            !(offset <= write.offset && write.offset as usize + write.data.len() <= end)
        });
        apply_at(&mut self.durable, offset, data);
    }

    pub fn set_len_visible(&mut self, len: usize) {
        self.visible.resize(len, 0);
        self.min_len_since_sync = self.min_len_since_sync.min(len);
    }

    /// A failed fdatasync: the writes it covered stay visible but are no longer tracked as dirty,
    /// so no later fdatasync copies them to the medium (the length still syncs).
    pub fn forget_dirty_writes(&mut self) {
        for write in self.unsynced_writes.drain(..) {
            let start = write.offset as usize;
            self.lost_ranges.push((start, start + write.data.len()));
        }
    }

    /// fdatasync: the durable image becomes the visible one (data and length). Only the ranges that
    /// can differ are copied, so a group commit on a large segment costs the size of the group.
    pub fn sync(&mut self) {
        let len = self.visible.len();
        let keep = self.min_len_since_sync.min(self.durable.len()).min(len);
        self.durable.truncate(keep);
        self.durable.extend_from_slice(&self.visible[keep..]);
        for &(start, end) in &self.lost_ranges {
            // Below `keep` the medium still holds its old bytes (the dropped overwrite never
            // reached it); above, the extension was never written: zeros.
            let (start, end) = (start.max(keep).min(len), end.min(len));
            if start < end {
                self.durable[start..end].fill(0);
            }
        }
        for write in self.unsynced_writes.drain(..) {
            let start = (write.offset as usize).min(len);
            let end = (write.offset as usize)
                .saturating_add(write.data.len())
                .min(len);
            self.durable[start..end].copy_from_slice(&self.visible[start..end]);
        }
        self.min_len_since_sync = len;
        debug_assert_eq!(self.durable.len(), self.visible.len());
    }
}

/// Copy `data` into `image` at `offset`, zero-filling any gap past the current end.
pub(crate) fn apply_at(image: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let start = usize::try_from(offset).expect("memory backend offsets fit in usize");
    let end = start + data.len();
    if image.len() < end {
        image.resize(end, 0);
    }
    image[start..end].copy_from_slice(data);
}
