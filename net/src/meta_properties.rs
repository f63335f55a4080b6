//! `meta.properties`: the stamp `ringlog format` puts on a data folder, as `kafka-storage format`
//! does, so that a node never starts on a folder that is not its own.
//!
//! ```text
//! version=1
//! cluster.id=MkU3OEVBNTcwNTJENDM2Qg
//! node.id=1
//! directory.id=J8aAPcfLQt2bqs1JT_rMgQ
//! ```
//!
//! `directory.id` (KIP-853, as Kafka writes it) names this data folder: a new random Uuid at
//! each format, so a voter whose disk was replaced (and formatted again) has another one. A
//! folder formatted before it was written has none.
//!
//! The file is written to a temporary name, fsynced, renamed into place and the folder fsynced,
//! so a crash leaves either no stamp or a whole one.

use std::io::Write;
use std::path::{Path, PathBuf};

pub const FILE_NAME: &str = "meta.properties";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaProperties {
    pub cluster_id: String,
    pub node_id: i32,
    /// KIP-853: this folder's directory id; `None` in a folder formatted without one.
    pub directory_id: Option<[u8; 16]>,
}

#[derive(Debug, thiserror::Error)]
pub enum MetaPropertiesError {
    #[error("{dir} is not formatted (no {FILE_NAME}); run `ringlog format` first", dir = .0.display())]
    NotFormatted(PathBuf),
    #[error("{dir} belongs to node {found}, but this node is {expected}", dir = .dir.display())]
    ForeignNode {
        dir: PathBuf,
        expected: i32,
        found: i32,
    },
    #[error("{dir} belongs to cluster {found:?}, but {expected:?} was expected", dir = .dir.display())]
    ForeignCluster {
        dir: PathBuf,
        expected: String,
        found: String,
    },
    #[error("{dir} is already formatted for cluster {cluster_id:?} as node {node_id}", dir = .dir.display())]
    AlreadyFormatted {
        dir: PathBuf,
        cluster_id: String,
        node_id: i32,
    },
    #[error("{path}: {reason}", path = .path.display())]
    Malformed { path: PathBuf, reason: String },
    #[error("{path}: {source}", path = .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "cluster id {0:?} is not valid: use 22 characters of base64url, as `ringlog format` generates"
    )]
    InvalidClusterId(String),
}

impl MetaProperties {
    /// Stamp `dir` (created if missing). Refuses a folder that is already formatted.
    pub fn format(dir: &Path, meta: &MetaProperties) -> Result<(), MetaPropertiesError> {
        if !is_valid_cluster_id(&meta.cluster_id) {
            return Err(MetaPropertiesError::InvalidClusterId(
                meta.cluster_id.clone(),
            ));
        }
        match MetaProperties::read(dir) {
            Ok(existing) => {
                return Err(MetaPropertiesError::AlreadyFormatted {
                    dir: dir.to_path_buf(),
                    cluster_id: existing.cluster_id,
                    node_id: existing.node_id,
                });
            }
            Err(MetaPropertiesError::NotFormatted(_)) => {}
            Err(other) => return Err(other),
        }
        let io_error = |path: &Path| {
            let path = path.to_path_buf();
            move |source| MetaPropertiesError::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io_error(dir))?;
        let final_path = dir.join(FILE_NAME);
        let temporary_path = dir.join(format!("{FILE_NAME}.tmp"));
        let mut text = format!(
            "#\n#Written by ringlog format\nversion=1\ncluster.id={}\nnode.id={}\n",
            meta.cluster_id, meta.node_id
        );
        if let Some(directory_id) = &meta.directory_id {
            text.push_str(&format!("directory.id={}\n", uuid_text(directory_id)));
        }
        let mut file = std::fs::File::create(&temporary_path).map_err(io_error(&temporary_path))?;
        file.write_all(text.as_bytes())
            .map_err(io_error(&temporary_path))?;
        file.sync_all().map_err(io_error(&temporary_path))?;
        drop(file);
        std::fs::rename(&temporary_path, &final_path).map_err(io_error(&final_path))?;
        std::fs::File::open(dir)
            .and_then(|folder| folder.sync_all())
            .map_err(io_error(dir))?;
        Ok(())
    }

    /// Read the stamp of `dir`.
    pub fn read(dir: &Path) -> Result<MetaProperties, MetaPropertiesError> {
        let path = dir.join(FILE_NAME);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(MetaPropertiesError::NotFormatted(dir.to_path_buf()));
            }
            Err(source) => return Err(MetaPropertiesError::Io { path, source }),
        };
        let malformed = |reason: &str| MetaPropertiesError::Malformed {
            path: path.clone(),
            reason: reason.into(),
        };
        let (mut cluster_id, mut node_id, mut version) = (None, None, None);
        let mut directory_id = None;
        for line in text
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
        {
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| malformed("expected key=value lines"))?;
            match key.trim() {
                "cluster.id" => cluster_id = Some(value.trim().to_string()),
                "node.id" => {
                    node_id = Some(
                        value
                            .trim()
                            .parse::<i32>()
                            .map_err(|_| malformed("node.id is not a number"))?,
                    )
                }
                "version" => version = Some(value.trim().to_string()),
                "directory.id" => {
                    directory_id = Some(
                        parse_uuid_text(value.trim())
                            .ok_or_else(|| malformed("directory.id is not a Uuid"))?,
                    )
                }
                // Tolerate what Kafka writes, require what we need.
                _ => {}
            }
        }
        if version.as_deref() != Some("1") {
            return Err(malformed("version must be 1"));
        }
        Ok(MetaProperties {
            cluster_id: cluster_id.ok_or_else(|| malformed("cluster.id is missing"))?,
            node_id: node_id.ok_or_else(|| malformed("node.id is missing"))?,
            directory_id,
        })
    }

    /// Read the stamp and check that it belongs to `node_id` (and to `cluster_id` if given).
    pub fn check(
        dir: &Path,
        node_id: i32,
        cluster_id: Option<&str>,
    ) -> Result<MetaProperties, MetaPropertiesError> {
        let meta = MetaProperties::read(dir)?;
        if meta.node_id != node_id {
            return Err(MetaPropertiesError::ForeignNode {
                dir: dir.to_path_buf(),
                expected: node_id,
                found: meta.node_id,
            });
        }
        if let Some(expected) = cluster_id
            && meta.cluster_id != expected
        {
            return Err(MetaPropertiesError::ForeignCluster {
                dir: dir.to_path_buf(),
                expected: expected.to_string(),
                found: meta.cluster_id,
            });
        }
        Ok(meta)
    }
}

/// A new random cluster id: 16 random bytes in unpadded base64url (22 characters), like Kafka's
/// `Uuid.randomUuid().toString()`. The randomness comes from the OS, outside the replication core.
/// Like Kafka's, it never starts with `-` (1 in 64 draws would), which a command line such as
/// `ringlog format --cluster-id -Vx…` would take for an option.
pub fn random_cluster_id() -> std::io::Result<String> {
    use std::io::Read;
    let mut urandom = std::fs::File::open("/dev/urandom")?;
    loop {
        let mut bytes = [0u8; 16];
        urandom.read_exact(&mut bytes)?;
        if let Some(id) = cluster_id_from(&bytes) {
            return Ok(id);
        }
    }
}

/// A new random directory id (KIP-853) for `ringlog format`: 16 bytes from the OS, never zero
/// (Kafka's `Uuid.ZERO_UUID` means "no directory id").
pub fn random_directory_id() -> std::io::Result<[u8; 16]> {
    use std::io::Read;
    let mut urandom = std::fs::File::open("/dev/urandom")?;
    loop {
        let mut bytes = [0u8; 16];
        urandom.read_exact(&mut bytes)?;
        if bytes != [0; 16] {
            return Ok(bytes);
        }
    }
}

/// The cluster id of 16 random bytes, or `None` for a draw Kafka's `Uuid.randomUuid` also
/// rejects (a string starting with `-`).
fn cluster_id_from(bytes: &[u8; 16]) -> Option<String> {
    let id = base64url(bytes);
    (!id.starts_with('-')).then_some(id)
}

/// Kafka's cluster ids are 16 bytes in unpadded base64url: 22 characters of `[A-Za-z0-9_-]`.
pub fn is_valid_cluster_id(text: &str) -> bool {
    text.len() == 22
        && text
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
}

/// A Uuid (a KIP-853 directory id) as Kafka prints it: unpadded base64url, 22 characters.
pub fn uuid_text(bytes: &[u8; 16]) -> String {
    base64url(bytes)
}

/// A Uuid from Kafka's text form ([`uuid_text`]); `None` if it is not 22 base64url characters
/// of 16 bytes.
pub fn parse_uuid_text(text: &str) -> Option<[u8; 16]> {
    if !is_valid_cluster_id(text) {
        return None;
    }
    let symbol = |byte: u8| -> u32 {
        match byte {
            b'A'..=b'Z' => u32::from(byte - b'A'),
            b'a'..=b'z' => u32::from(byte - b'a') + 26,
            b'0'..=b'9' => u32::from(byte - b'0') + 52,
            b'-' => 62,
            _ => 63,
        }
    };
    let mut out = [0u8; 16];
    let mut at = 0;
    for chunk in text.as_bytes().chunks(4) {
        let value = chunk.iter().enumerate().fold(0u32, |acc, (index, byte)| {
            acc | symbol(*byte) << (18 - 6 * index)
        });
        for index in 0..chunk.len() - 1 {
            out[at] = (value >> (16 - 8 * index)) as u8;
            at += 1;
        }
    }
    // 22 symbols carry 132 bits: the last 4 must be zero, or the text names no 16 bytes.
    (base64url(&out) == text).then_some(out)
}

fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let value = chunk.iter().enumerate().fold(0u32, |acc, (index, byte)| {
            acc | (*byte as u32) << (16 - 8 * index)
        });
        let symbols = chunk.len() + 1;
        for index in 0..symbols {
            out.push(ALPHABET[(value >> (18 - 6 * index) & 63) as usize] as char);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// First byte 0b111110xx encodes to `-` first (62 in base64url): such a draw is refused,
    /// as Kafka's `Uuid.randomUuid` refuses it; any other first byte is kept.
    #[test]
    fn a_cluster_id_never_starts_with_a_dash() {
        let mut bytes = [7u8; 16];
        bytes[0] = 0b1111_1000;
        assert_eq!(base64url(&bytes).chars().next(), Some('-'));
        assert_eq!(cluster_id_from(&bytes), None);
        bytes[0] = 0b1111_0000;
        assert_eq!(cluster_id_from(&bytes).unwrap().chars().next(), Some('8'));
        for _ in 0..1000 {
            let id = random_cluster_id().unwrap();
            assert!(is_valid_cluster_id(&id) && !id.starts_with('-'), "{id}");
        }
    }

    #[test]
    fn uuid_text_round_trips_and_rejects_what_is_no_uuid() {
        for bytes in [[0u8; 16], [255; 16], *b"0123456789abcdef"] {
            let text = uuid_text(&bytes);
            assert_eq!(text.len(), 22);
            assert_eq!(parse_uuid_text(&text), Some(bytes));
        }
        assert_eq!(uuid_text(&[0; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(parse_uuid_text("short"), None);
        assert_eq!(parse_uuid_text("AAAAAAAAAAAAAAAAAAAAA!"), None);
        // The last symbol's low bits fall past byte 16.
        assert_eq!(parse_uuid_text("AAAAAAAAAAAAAAAAAAAAAB"), None);
    }

    #[test]
    fn format_then_check_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let meta = MetaProperties {
            cluster_id: random_cluster_id().unwrap(),
            node_id: 3,
            directory_id: Some(random_directory_id().unwrap()),
        };
        MetaProperties::format(dir.path(), &meta).unwrap();
        assert_eq!(
            MetaProperties::check(dir.path(), 3, Some(&meta.cluster_id)).unwrap(),
            meta
        );
        assert!(!dir.path().join("meta.properties.tmp").exists());
        let text = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        assert!(text.contains(&format!(
            "directory.id={}\n",
            uuid_text(&meta.directory_id.unwrap())
        )));
    }

    /// A folder formatted before `directory.id` was written still reads, without one; a
    /// `directory.id` that is no Uuid is refused.
    #[test]
    fn directory_id_is_optional_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        std::fs::write(
            &path,
            "version=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qg\nnode.id=1\n",
        )
        .unwrap();
        assert_eq!(MetaProperties::read(dir.path()).unwrap().directory_id, None);
        std::fs::write(
            &path,
            "version=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qg\nnode.id=1\ndirectory.id=nope\n",
        )
        .unwrap();
        assert!(matches!(
            MetaProperties::read(dir.path()),
            Err(MetaPropertiesError::Malformed { .. })
        ));
    }

    #[test]
    fn refuses_unformatted_foreign_and_double_format() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            MetaProperties::check(dir.path(), 1, None),
            Err(MetaPropertiesError::NotFormatted(_))
        ));
        let meta = MetaProperties {
            cluster_id: "MkU3OEVBNTcwNTJENDM2Qg".into(),
            node_id: 1,
            directory_id: None,
        };
        MetaProperties::format(dir.path(), &meta).unwrap();
        let foreign = MetaProperties::check(dir.path(), 2, None).unwrap_err();
        assert!(matches!(
            foreign,
            MetaPropertiesError::ForeignNode {
                expected: 2,
                found: 1,
                ..
            }
        ));
        assert!(foreign.to_string().contains("belongs to node 1"));
        assert!(matches!(
            MetaProperties::check(dir.path(), 1, Some("AAAAAAAAAAAAAAAAAAAAAA")),
            Err(MetaPropertiesError::ForeignCluster { .. })
        ));
        assert!(matches!(
            MetaProperties::format(dir.path(), &meta),
            Err(MetaPropertiesError::AlreadyFormatted { .. })
        ));
    }

    #[test]
    fn malformed_stamp_is_reported_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME), "version=1\nnode.id=x\n").unwrap();
        let error = MetaProperties::read(dir.path()).unwrap_err();
        assert!(error.to_string().contains("meta.properties"), "{error}");
        assert!(matches!(error, MetaPropertiesError::Malformed { .. }));
    }

    #[test]
    fn cluster_ids_look_like_kafkas() {
        let id = random_cluster_id().unwrap();
        assert!(is_valid_cluster_id(&id), "{id}");
        assert_ne!(id, random_cluster_id().unwrap());
        // 16 zero bytes encode to 21 'A's and one more 'A' (the last 4 bits).
        assert_eq!(base64url(&[0u8; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(base64url(&[0xff; 3]), "____");
        assert!(!is_valid_cluster_id("short"));
    }
}
