//! A recall directory: the originals of one-shot compactions kept as files, so a process that
//! ends (the CLI's `compactor compact`) leaves its recall ids answerable by a later one
//! (`compactor recall ID`).
//!
//! ```text
//! compact -> Report.recall (ids) -> Compactor::recall(id) -> RecallDir::write -> DIR/rc_….json
//! recall ID                                              -> RecallDir::read  <- DIR/rc_….json
//! ```
//!
//! Each file holds one [`Recalled`] as compact JSON (`{"id", "kind", "original"}`), so the
//! original comes back byte for byte. Files are written whole (a temporary file renamed), the
//! directory is private to its owner on Unix (0700), and [`RecallDir::prune`] bounds it by
//! bytes, oldest files first.

use super::{RecallError, RecallId, Recalled};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// Why a recall directory could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum RecallDirError {
    /// The id is malformed, or the directory does not hold it.
    #[error(transparent)]
    Recall(#[from] RecallError),
    /// A file or the directory could not be read, written or listed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A file of the directory is not a recalled original (edited by hand, cut short).
    #[error("{path}: not a recalled original: {source}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
}

/// A directory of recalled originals, one `rc_….json` file per id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecallDir {
    path: PathBuf,
}

impl RecallDir {
    /// The directory at `path` (created by the first [`RecallDir::write`]).
    pub fn new(path: impl Into<PathBuf>) -> RecallDir {
        RecallDir { path: path.into() }
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn file(&self, id: RecallId) -> PathBuf {
        self.path.join(format!("{id}.json"))
    }

    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RecallDirError + '_ {
        move |source| RecallDirError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// Keeps `recalled` as `DIR/<id>.json` (a file there already is left as it is: same id,
    /// same content). Creates the directory, private to its owner on Unix.
    ///
    /// # Errors
    /// [`RecallDirError::Recall`] for a malformed id, [`RecallDirError::Io`] when the
    /// directory or the file cannot be written.
    pub fn write(&self, recalled: &Recalled) -> Result<(), RecallDirError> {
        let id = RecallId::parse(&recalled.id)?;
        let file = self.file(id);
        if file.exists() {
            return Ok(());
        }
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&self.path).map_err(Self::io(&self.path))?;
        let bytes = serde_json::to_vec(recalled).map_err(|source| RecallDirError::Corrupt {
            path: file.clone(),
            source,
        })?;
        // Whole or not at all: a reader never sees half a file, two writers of one id agree.
        let partial = self
            .path
            .join(format!(".{id}.{}.partial", std::process::id()));
        std::fs::write(&partial, bytes).map_err(Self::io(&partial))?;
        std::fs::rename(&partial, &file).map_err(|e| {
            let _ = std::fs::remove_file(&partial);
            Self::io(&file)(e)
        })
    }

    /// The original `id` names.
    ///
    /// # Errors
    /// [`RecallError::Malformed`] for an id not of the form `rc_` + 32 hex digits,
    /// [`RecallError::Unknown`] for one the directory does not hold (never written here, or
    /// pruned), [`RecallDirError::Io`] / [`RecallDirError::Corrupt`] for a file that cannot be
    /// read as an original.
    pub fn read(&self, id: &str) -> Result<Recalled, RecallDirError> {
        let parsed = RecallId::parse(id)?;
        let file = self.file(parsed);
        let bytes = match std::fs::read(&file) {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(RecallError::Unknown(parsed.to_string()).into());
            }
            Err(e) => return Err(Self::io(&file)(e)),
        };
        let recalled: Recalled =
            serde_json::from_slice(&bytes).map_err(|source| RecallDirError::Corrupt {
                path: file.clone(),
                source,
            })?;
        if recalled.id != parsed.to_string() {
            let source = serde::de::Error::custom(format!("it holds id {}", recalled.id));
            return Err(RecallDirError::Corrupt { path: file, source });
        }
        Ok(recalled)
    }

    /// Removes the oldest originals (by modification time) until the directory holds at most
    /// `max_bytes` bytes of them; returns how many were removed. A directory that does not
    /// exist holds nothing.
    ///
    /// # Errors
    /// [`RecallDirError::Io`] when the directory cannot be listed or a file not removed.
    pub fn prune(&self, max_bytes: u64) -> Result<usize, RecallDirError> {
        let entries = match std::fs::read_dir(&self.path) {
            Ok(e) => e,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(Self::io(&self.path)(e)),
        };
        let mut files = Vec::new();
        for entry in entries {
            let entry = entry.map_err(Self::io(&self.path))?;
            let name = entry.file_name();
            let is_original = name
                .to_str()
                .and_then(|n| n.strip_suffix(".json"))
                .is_some_and(|stem| RecallId::parse(stem).is_ok());
            if !is_original {
                continue;
            }
            // A file removed meanwhile (another process pruning) is not counted.
            let Ok(meta) = entry.metadata() else { continue };
            let modified = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
            files.push((modified, meta.len(), entry.path()));
        }
        let mut total: u64 = files.iter().map(|f| f.1).sum();
        files.sort();
        let mut removed = 0;
        for (_, len, path) in files {
            if total <= max_bytes {
                break;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(Self::io(&path)(e)),
            }
            total = total.saturating_sub(len);
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recall::RecallKind;
    use serde_json::json;

    fn scratch(name: &str) -> RecallDir {
        let path = std::env::temp_dir().join(format!(
            "compactor-recall-dir-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&path);
        RecallDir::new(path)
    }

    fn recalled(n: usize) -> Recalled {
        // Numbers and key order as written: the original must come back byte for byte.
        let original = json!({"type": "tool_result", "tool_use_id": format!("t{n}"), "z": 1.50, "a": "x".repeat(100)});
        let bytes = serde_json::to_vec(&original).unwrap();
        let id = crate::recall::RecallKey::public().id(
            RecallKind::Block,
            crate::recall::Tenant::NONE,
            &bytes,
        );
        Recalled {
            id: id.to_string(),
            kind: RecallKind::Block,
            original,
        }
    }

    #[test]
    fn an_original_written_comes_back_byte_for_byte_and_others_are_unknown() {
        let dir = scratch("roundtrip");
        let r = recalled(1);
        dir.write(&r).unwrap();
        dir.write(&r).unwrap();
        let back = dir.read(&r.id).unwrap();
        assert_eq!(back, r);
        assert_eq!(
            serde_json::to_string(&back.original).unwrap(),
            serde_json::to_string(&r.original).unwrap()
        );
        let other = recalled(2).id;
        assert!(matches!(
            dir.read(&other),
            Err(RecallDirError::Recall(RecallError::Unknown(id))) if id == other
        ));
        assert!(matches!(
            dir.read("rc_12"),
            Err(RecallDirError::Recall(RecallError::Malformed(_)))
        ));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path()).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
        }
        std::fs::remove_dir_all(dir.path()).unwrap();
    }

    #[test]
    fn a_file_that_is_not_an_original_is_named() {
        let dir = scratch("corrupt");
        let r = recalled(3);
        dir.write(&r).unwrap();
        let file = dir.path().join(format!("{}.json", r.id));
        std::fs::write(&file, b"{\"id\": ").unwrap();
        let err = dir.read(&r.id).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{}: not a recalled original: ", file.display())),
            "{err}"
        );
        std::fs::remove_dir_all(dir.path()).unwrap();
    }

    #[test]
    fn pruning_removes_the_oldest_until_the_bound_holds() {
        let dir = scratch("prune");
        let all: Vec<Recalled> = (0..5).map(recalled).collect();
        for (i, r) in all.iter().enumerate() {
            dir.write(r).unwrap();
            let file = dir.path().join(format!("{}.json", r.id));
            let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000 + i as u64);
            std::fs::File::options()
                .write(true)
                .open(&file)
                .unwrap()
                .set_modified(at)
                .unwrap();
        }
        let size = std::fs::metadata(dir.path().join(format!("{}.json", all[0].id)))
            .unwrap()
            .len();
        assert_eq!(dir.prune(size * 2).unwrap(), 3);
        let kept: Vec<bool> = all.iter().map(|r| dir.read(&r.id).is_ok()).collect();
        assert_eq!(kept, vec![false, false, false, true, true]);
        assert_eq!(dir.prune(size * 2).unwrap(), 0);
        std::fs::remove_dir_all(dir.path()).unwrap();
        assert_eq!(dir.prune(0).unwrap(), 0);
    }
}
