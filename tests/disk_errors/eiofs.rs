//! eiofs (`eiofs.c` beside this file) built and mounted for a test: a FUSE passthrough
//! filesystem whose one folder answers EIO while a trigger file exists, and whose reads in
//! that folder wait while a hold file exists. Shared by `tests/disk_errors.rs` and
//! `net/tests/server_zero_copy.rs` (which includes it by path).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// eiofs mounted over a folder (a node's formatted, not started, data folder, or any other):
/// the folder's contents move to a backing folder beside it, and the mount shows them at the
/// old path, so whatever names the folder stays as it is. Unmounted and stopped on drop.
pub struct FaultyDisk {
    mount: PathBuf,
    trigger: PathBuf,
    hold: PathBuf,
    log: PathBuf,
    daemon: Child,
}

impl FaultyDisk {
    /// Mounts eiofs (compiled from `source`, into `scratch`) on `data`, its contents moved to
    /// `data`.backing, failing under `faulty_folder` while the trigger file exists and holding
    /// reads there while the hold file exists.
    pub fn mount_over(
        data: &Path,
        faulty_folder: &str,
        source: &Path,
        scratch: &Path,
    ) -> FaultyDisk {
        let program = build(source, scratch);
        let backing = data.with_extension("backing");
        std::fs::rename(data, &backing).unwrap();
        std::fs::create_dir(data).unwrap();
        let trigger = data.with_extension("eio-trigger");
        let hold = data.with_extension("eio-hold");
        let log = data.with_extension("eiofs.log");
        let daemon = Command::new(&program)
            .arg(&backing)
            .arg(data)
            .arg(faulty_folder)
            .arg(&trigger)
            .arg(&hold)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("starting eiofs");
        let mut disk = FaultyDisk {
            mount: data.to_path_buf(),
            trigger,
            hold,
            log,
            daemon,
        };
        let mount = data.display().to_string();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = disk.daemon.try_wait() {
                panic!(
                    "eiofs exited ({status}) before mounting {mount}: this test mounts a FUSE \
                     filesystem and must run as root with /dev/fuse: {}",
                    std::fs::read_to_string(&disk.log).unwrap_or_default()
                );
            }
            let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
            if mounts
                .lines()
                .any(|l| l.split(' ').nth(1) == Some(mount.as_str()) && l.contains("fuse"))
            {
                return disk;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for eiofs to mount {mount}"
            );
            // The pause between two looks at the mount table, not a wait for the mount itself.
            std::thread::park_timeout(Duration::from_millis(20));
        }
    }

    /// From now on the faulty folder answers EIO.
    pub fn fail(&self) {
        std::fs::write(&self.trigger, b"").unwrap();
    }

    /// The disk is healthy again.
    pub fn heal(&self) {
        std::fs::remove_file(&self.trigger).unwrap();
    }

    /// From now on reads in the faulty folder wait until [`FaultyDisk::release_reads`].
    pub fn hold_reads(&self) {
        std::fs::write(&self.hold, b"").unwrap();
    }

    /// Held reads go on.
    pub fn release_reads(&self) {
        std::fs::remove_file(&self.hold).unwrap();
    }

    /// eiofs's log: one line per refused call.
    pub fn refusals(&self) -> Vec<String> {
        self.log_lines("eiofs: EIO")
    }

    /// eiofs's log: one line per read that began to wait.
    pub fn held_reads(&self) -> Vec<String> {
        self.log_lines("eiofs: held")
    }

    fn log_lines(&self, prefix: &str) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with(prefix))
            .map(str::to_string)
            .collect()
    }
}

impl Drop for FaultyDisk {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.hold);
        let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}

/// Compiles eiofs.c into the test's scratch folder.
fn build(source: &Path, scratch: &Path) -> PathBuf {
    let program = scratch.join("eiofs");
    let output = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "gcc -O2 -Wall -Werror -o '{}' '{}' $(pkg-config --cflags --libs fuse3)",
            program.display(),
            source.display()
        ))
        .output()
        .expect("running sh");
    assert!(
        output.status.success(),
        "building eiofs needs gcc, pkg-config and libfuse3-dev (scripts/test-all.sh installs \
         them): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    program
}
