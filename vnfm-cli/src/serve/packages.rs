//! The package index of `vnfm serve`: the packages of `[packages] dir`, read at start, again
//! for the entries that changed (looked for every `[packages] rescan_interval` seconds), and
//! all of them on a reload (`POST /admin/packages/reload`, SIGHUP). Requests look packages up
//! by `vnfdId` in memory and never read the folder; reading happens on tokio's blocking pool.
//!
//! What a change is, and what is refused, is [`crate::package_dir`]'s: an entry whose stamp
//! (kind, sizes and modification times of its files, `Files/` left out) differs from the last
//! look is read again; an entry that does not load, is refused, or repeats a `vnfdId` that an
//! earlier entry (in name order) has, is reported: on stderr once per change, in
//! `vnfm_packages{state="failed"}` and in the listing (`GET /admin/packages`, served by
//! `super::admin`).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use vnfm_core::driver::Clock;
use vnfm_core::package::VnfPackage;
use vnfm_core::problem::ProblemDetails;

use crate::error::CliError;
use crate::package_dir::{self, Stamp};

/// One entry of the folder at the last look.
#[derive(Debug, Clone)]
struct Entry {
    /// `None` when the entry was refused before it was stamped.
    stamp: Option<Stamp>,
    parsed: Result<Arc<VnfPackage>, String>,
}

/// The index at one look.
#[derive(Debug, Default)]
struct Snapshot {
    entries: BTreeMap<PathBuf, Entry>,
    by_id: HashMap<String, Arc<VnfPackage>>,
    /// Entry → why it is not in `by_id` (failed to load, refused, or a repeated `vnfdId`).
    failed: BTreeMap<PathBuf, String>,
    /// When the folder was last read.
    read_at: Option<DateTime<Utc>>,
    /// The folder could not be read at the last look (the entries are those of the look
    /// before).
    dir_error: Option<String>,
}

impl Snapshot {
    fn new(entries: BTreeMap<PathBuf, Entry>, read_at: DateTime<Utc>) -> Self {
        let mut by_id: HashMap<String, Arc<VnfPackage>> = HashMap::new();
        let mut owner: HashMap<String, &Path> = HashMap::new();
        let mut failed = BTreeMap::new();
        for (path, e) in &entries {
            match &e.parsed {
                Ok(pkg) => match owner.get(pkg.descriptor_id.as_str()) {
                    Some(first) => {
                        failed.insert(
                            path.clone(),
                            format!(
                                "{}: vnfdId {} is already the package of {}; expected one \
                                 package per vnfdId",
                                path.display(),
                                pkg.descriptor_id,
                                first.display()
                            ),
                        );
                    }
                    None => {
                        owner.insert(pkg.descriptor_id.clone(), path);
                        by_id.insert(pkg.descriptor_id.clone(), pkg.clone());
                    }
                },
                Err(reason) => {
                    failed.insert(path.clone(), reason.clone());
                }
            }
        }
        Self {
            entries,
            by_id,
            failed,
            read_at: Some(read_at),
            dir_error: None,
        }
    }
}

/// The listing of `GET /admin/packages`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Listing {
    /// `[packages] dir`, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    dir: Option<PathBuf>,
    /// When the folder was last read.
    #[serde(skip_serializing_if = "Option::is_none")]
    read_at: Option<DateTime<Utc>>,
    /// `[packages] rescan_interval`.
    rescan_interval: u64,
    /// Why the folder could not be read at the last look.
    #[serde(skip_serializing_if = "Option::is_none")]
    dir_error: Option<String>,
    /// The packages served, by entry name.
    packages: Vec<Listed>,
    /// The entries that are not served, and why.
    failed: Vec<Failed>,
    /// The `vnfdId` of the built-in demo package (served when no entry has it).
    builtin_vnfd_id: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Listed {
    path: PathBuf,
    vnfd_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    vnf_provider: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    vnf_product_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    vnf_software_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    vnfd_version: Option<String>,
    flavour_ids: Vec<String>,
}

#[derive(Debug, Serialize)]
struct Failed {
    path: PathBuf,
    reason: String,
}

/// The package index (see the module docs).
#[derive(Debug)]
pub(crate) struct PackageIndex {
    dir: Option<PathBuf>,
    rescan_interval: u64,
    quiet: bool,
    demo: Arc<VnfPackage>,
    current: RwLock<Arc<Snapshot>>,
    /// One look at the folder at a time.
    looking: tokio::sync::Mutex<()>,
    loaded_total: AtomicU64,
    failed_total: AtomicU64,
    /// What dates each look (`read_at`).
    clock: Arc<dyn Clock>,
}

impl PackageIndex {
    /// Reads `dir` (all of it) and the built-in demo package; the looks are dated on `clock`
    /// (the server's).
    ///
    /// # Errors
    /// The folder cannot be read ([`CliError::Config`], exit 2), or the built-in package is
    /// broken.
    pub(crate) async fn open(
        dir: Option<PathBuf>,
        rescan_interval: u64,
        quiet: bool,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, CliError> {
        let demo = Arc::new(crate::builtin::demo_package()?);
        let index = Self {
            dir,
            rescan_interval,
            quiet,
            demo,
            current: RwLock::new(Arc::new(Snapshot::default())),
            looking: tokio::sync::Mutex::new(()),
            loaded_total: AtomicU64::new(0),
            failed_total: AtomicU64::new(0),
            clock,
        };
        if let Some(dir) = &index.dir {
            index.look(true).await.map_err(|e| CliError::Config {
                file: dir.clone(),
                message: "cannot read the packages folder ([packages] dir)".into(),
                source: Some(e),
            })?;
            let s = index.snapshot();
            if !quiet {
                tracing::info!(
                    "packages: {} served from {}, {} not (GET /admin/packages)",
                    s.by_id.len(),
                    dir.display(),
                    s.failed.len()
                );
            }
        }
        Ok(index)
    }

    fn snapshot(&self) -> Arc<Snapshot> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The package of `vnfd_id`: one of the folder's, else the built-in demo package when the
    /// id is its own. Never reads the folder.
    ///
    /// # Errors
    /// A 422 ProblemDetails for an id without a package.
    pub(crate) fn get(&self, vnfd_id: &str) -> Result<Arc<VnfPackage>, ProblemDetails> {
        let s = self.snapshot();
        if let Some(p) = s.by_id.get(vnfd_id) {
            return Ok(p.clone());
        }
        if vnfd_id == self.demo.descriptor_id {
            return Ok(self.demo.clone());
        }
        let detail = match &self.dir {
            Some(dir) => format!(
                "no package with vnfdId {vnfd_id} in [packages] dir {} ({} served, {} not \
                 loaded: GET /admin/packages lists them; a package added to the folder is \
                 served after the next look, or after POST /admin/packages/reload)",
                dir.display(),
                s.by_id.len(),
                s.failed.len()
            ),
            None => format!(
                "no package with vnfdId {vnfd_id}: [packages] dir is not set, and only the \
                 built-in demo package ({}) is known",
                self.demo.descriptor_id
            ),
        };
        Err(ProblemDetails::new(422, detail))
    }

    /// The package of `vnfd_id` and where it comes from (the entry of the folder, or `None`
    /// for the built-in demo package), as [`PackageIndex::get`] finds it; `None` for an id
    /// without a package.
    pub(crate) fn origin(&self, vnfd_id: &str) -> Option<(Arc<VnfPackage>, Option<PathBuf>)> {
        let s = self.snapshot();
        if let Some(p) = s.by_id.get(vnfd_id) {
            let entry = s.entries.iter().find_map(|(path, e)| match &e.parsed {
                Ok(q) if Arc::ptr_eq(p, q) => Some(path.clone()),
                _ => None,
            });
            return entry.map(|path| (p.clone(), Some(path)));
        }
        (vnfd_id == self.demo.descriptor_id).then(|| (self.demo.clone(), None))
    }

    /// Looks at the folder: the entries whose stamp changed since the last look (all of them
    /// when `all`) are read again, on the blocking pool. Returns whether anything changed.
    ///
    /// # Errors
    /// The folder itself cannot be read (the index keeps the last look's packages).
    pub(crate) async fn look(&self, all: bool) -> std::io::Result<bool> {
        let Some(dir) = self.dir.clone() else {
            return Ok(false);
        };
        let _one = self.looking.lock().await;
        let before = self.snapshot();
        let previous = before.entries.clone();
        let read = tokio::task::spawn_blocking(move || read_folder(&dir, &previous, all))
            .await
            .map_err(std::io::Error::other)?;
        let (entries, reread) = match read {
            Ok(r) => r,
            Err(e) => {
                let message = e.to_string();
                if before.dir_error.as_deref() != Some(message.as_str()) {
                    tracing::warn!(
                        "cannot read the packages folder {}: {message}; the packages \
                         read before stay served",
                        self.dir_display()
                    );
                    let mut kept = Snapshot::new(before.entries.clone(), self.clock.now());
                    kept.read_at = before.read_at;
                    kept.dir_error = Some(message);
                    *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(kept);
                }
                return Err(e);
            }
        };
        let removed: Vec<&PathBuf> = before
            .entries
            .keys()
            .filter(|p| !entries.contains_key(*p))
            .collect();
        if reread.is_empty() && removed.is_empty() && before.dir_error.is_none() && !all {
            return Ok(false);
        }
        for p in &reread {
            match entries.get(p).map(|e| &e.parsed) {
                Some(Ok(pkg)) => {
                    self.loaded_total.fetch_add(1, Ordering::Relaxed);
                    if !self.quiet {
                        tracing::info!(
                            "package {} read (vnfdId {})",
                            p.display(),
                            pkg.descriptor_id
                        );
                    }
                }
                Some(Err(reason)) => {
                    self.failed_total.fetch_add(1, Ordering::Relaxed);
                    // Errors are printed with --quiet too.
                    tracing::warn!("package {} not loaded: {reason}", p.display());
                }
                None => {}
            }
        }
        if !self.quiet {
            for p in removed {
                tracing::info!("package {} removed", p.display());
            }
        }
        let next = Snapshot::new(entries, self.clock.now());
        for (p, reason) in &next.failed {
            // A repeated vnfdId is not a failure of the entry's own reading: say it once here.
            if reread.contains(p) && matches!(next.entries.get(p).map(|e| &e.parsed), Some(Ok(_))) {
                tracing::warn!("package {} not served: {reason}", p.display());
            }
        }
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(next);
        Ok(true)
    }

    pub(crate) fn dir_display(&self) -> String {
        self.dir
            .as_deref()
            .map(|d| d.display().to_string())
            .unwrap_or_default()
    }

    pub(crate) fn listing(&self) -> Listing {
        let s = self.snapshot();
        let mut packages = Vec::new();
        for (path, e) in &s.entries {
            if let (Ok(p), false) = (&e.parsed, s.failed.contains_key(path)) {
                packages.push(Listed {
                    path: path.clone(),
                    vnfd_id: p.descriptor_id.clone(),
                    vnf_provider: p.provider.clone(),
                    vnf_product_name: p.product_name.clone(),
                    vnf_software_version: p.software_version.clone(),
                    vnfd_version: p.descriptor_version.clone(),
                    flavour_ids: p.flavours.keys().cloned().collect(),
                });
            }
        }
        Listing {
            dir: self.dir.clone(),
            read_at: s.read_at,
            rescan_interval: self.rescan_interval,
            dir_error: s.dir_error.clone(),
            packages,
            failed: s
                .failed
                .iter()
                .map(|(path, reason)| Failed {
                    path: path.clone(),
                    reason: reason.clone(),
                })
                .collect(),
            builtin_vnfd_id: self.demo.descriptor_id.clone(),
        }
    }

    /// `[packages] rescan_interval`, when the folder is to be looked at (`None`: no folder,
    /// or 0).
    pub(crate) fn rescan_interval(&self) -> Option<Duration> {
        (self.dir.is_some() && self.rescan_interval > 0)
            .then(|| Duration::from_secs(self.rescan_interval))
    }

    /// Reads every package of the folder again (a reload).
    pub(crate) async fn reload(&self) -> std::io::Result<()> {
        self.look(true).await.map(|_| ())
    }

    /// Appends the package series to a `/metrics` text.
    pub(crate) fn render_metrics(&self, s: &mut String) {
        let snap = self.snapshot();
        let _ = writeln!(
            s,
            "# HELP vnfm_packages Entries of [packages] dir at the last look, by state: served \
             (loaded) or not (failed: does not load, refused, or a repeated vnfdId).\n\
             # TYPE vnfm_packages gauge\n\
             vnfm_packages{{state=\"loaded\"}} {}\n\
             vnfm_packages{{state=\"failed\"}} {}",
            snap.by_id.len(),
            snap.failed.len()
        );
        let _ = writeln!(
            s,
            "# HELP vnfm_package_reads_total Readings of a package of [packages] dir (at start, \
             for a changed entry, on a reload), by outcome.\n\
             # TYPE vnfm_package_reads_total counter\n\
             vnfm_package_reads_total{{outcome=\"loaded\"}} {}\n\
             vnfm_package_reads_total{{outcome=\"failed\"}} {}",
            self.loaded_total.load(Ordering::Relaxed),
            self.failed_total.load(Ordering::Relaxed)
        );
    }
}

/// Reads the folder `dir`: every entry's stamp, and the package of each entry that is new, or
/// whose stamp differs from `previous` (of every entry when `all`). Returns the entries and
/// the paths read.
fn read_folder(
    dir: &Path,
    previous: &BTreeMap<PathBuf, Entry>,
    all: bool,
) -> std::io::Result<(BTreeMap<PathBuf, Entry>, Vec<PathBuf>)> {
    let mut entries = BTreeMap::new();
    let mut reread = Vec::new();
    for path in package_dir::entries(dir)? {
        let stamp = package_dir::inspect(&path);
        if let (Ok(s), Some(old), false) = (&stamp, previous.get(&path), all) {
            if old.stamp == Some(*s) {
                entries.insert(path, old.clone());
                continue;
            }
        }
        let entry = match stamp {
            Err(reason) => Entry {
                stamp: None,
                parsed: Err(reason),
            },
            // Stamped again after reading: a package that changed while it was read is read
            // again at the next look.
            Ok(s) => match package_dir::load(&path) {
                Ok((after, pkg)) => Entry {
                    stamp: (after == s).then_some(s),
                    parsed: Ok(Arc::new(pkg)),
                },
                Err(reason) => Entry {
                    stamp: Some(s),
                    parsed: Err(reason),
                },
            },
        };
        // An unchanged refusal is not read (nor reported) again.
        if let (Err(_), Some(old), false) = (&entry.parsed, previous.get(&path), all) {
            let same = matches!((&old.parsed, &entry.parsed), (Err(a), Err(b)) if a == b);
            if same && old.stamp.is_none() && entry.stamp.is_none() {
                entries.insert(path, entry);
                continue;
            }
        }
        reread.push(path.clone());
        entries.insert(path, entry);
    }
    Ok((entries, reread))
}
