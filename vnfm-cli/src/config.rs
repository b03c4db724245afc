//! `vnfm.toml`: the configuration file, and how flags and environment variables override it.
//!
//! Precedence, highest first: a command-line flag, its environment variable, the configuration
//! file, the built-in default. The file is the one named by `--config` / `VNFM_CONFIG`, else
//! `./vnfm.toml` when it exists, else none. Unknown sections or keys are errors.
//!
//! ```toml
//! [vim]
//! kind = "sim"              # --vim, VNFM_VIM. "sim" (default): the simulated cloud
//! cloud = "my-cloud.yaml"   # --cloud, VNFM_CLOUD. Cloud file of the simulator; default: built-in demo cloud
//! seed = 0                  # --sim-seed, VNFM_SIM_SEED. Seed of the simulator's ids and choices
//!
//! [packages]
//! dir = "packages"          # --packages-dir, VNFM_PACKAGES_DIR. Packages known by vnfdId
//!
//! [state]
//! path = "vnfm.sqlite"      # --state, VNFM_STATE. Default: $XDG_STATE_HOME/vnfm/state.sqlite
//!                           # (or ~/.local/state/vnfm/state.sqlite)
//!
//! [placement]
//! fallback_best_effort = false   # fallbackBestEffort of every placement constraint
//! reselect_zones = false         # reselect zones when a stack fails for lack of resources
//! insufficient_resource_pattern = "..."  # regex on stack_status_reason; default: see below
//! max_reselections = 3           # stack updates after the first attempt; unset = no limit
//! selection = "random"           # "random" (the spec) or "capacity-aware"
//! seed = 0                       # seed of the random choices (also --seed)
//! ```
//!
//! The default `insufficient_resource_pattern` is
//! [`vnfm_core::reselect::DEFAULT_INSUFFICIENT_RESOURCE_PATTERN`]: it matches create and update
//! failures whose Nova fault is "No valid host was found" or "Exceeded maximum number of
//! retries", with nested resource paths. An invalid regex is a configuration error at start.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::CliError;

/// The kind of VIM the drivers talk to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum VimKind {
    /// The built-in simulated cloud.
    #[default]
    Sim,
    /// A real OpenStack (Keystone v3, Nova, Heat).
    Openstack,
}

/// `[vim]`
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VimConfig {
    /// `kind`: `sim` (default) or `openstack`.
    #[serde(default)]
    pub kind: VimKind,
    /// `cloud`: the simulator's cloud file; `None` means the built-in demo cloud.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud: Option<PathBuf>,
    /// `seed`: the simulator's seed (default 0).
    #[serde(default)]
    pub seed: u64,
}

/// `[packages]`
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackagesConfig {
    /// `dir`: a directory of VNF packages (directories or zips), known by their vnfdId.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
}

/// `[state]`
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateConfig {
    /// `path`: the SQLite state file; `None` means the default location.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
}

/// How a zone is chosen among the compliant ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum SelectionKind {
    /// A random compliant zone (seeded), as the spec says.
    #[default]
    Random,
    /// The compliant zone with the most free capacity.
    CapacityAware,
}

/// `[placement]`
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlacementConfig {
    /// `fallback_best_effort` (default false).
    #[serde(default)]
    pub fallback_best_effort: bool,
    /// `reselect_zones` (default false).
    #[serde(default)]
    pub reselect_zones: bool,
    /// `insufficient_resource_pattern`; `None` means the default pattern.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insufficient_resource_pattern: Option<String>,
    /// `max_reselections`; `None` means no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_reselections: Option<u32>,
    /// `selection` (default random).
    #[serde(default)]
    pub selection: SelectionKind,
    /// `seed` (default 0).
    #[serde(default)]
    pub seed: u64,
}

/// The whole configuration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `[vim]`
    #[serde(default)]
    pub vim: VimConfig,
    /// `[packages]`
    #[serde(default)]
    pub packages: PackagesConfig,
    /// `[state]`
    #[serde(default)]
    pub state: StateConfig,
    /// `[placement]`
    #[serde(default)]
    pub placement: PlacementConfig,
}

/// Values given on the command line or in the environment, which override the file.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `--vim`
    pub vim: Option<VimKind>,
    /// `--cloud`
    pub cloud: Option<PathBuf>,
    /// `--sim-seed`
    pub sim_seed: Option<u64>,
    /// `--packages-dir`
    pub packages_dir: Option<PathBuf>,
    /// `--state`
    pub state: Option<PathBuf>,
}

impl Config {
    /// Parses a configuration file's text; `file` names it in errors.
    ///
    /// # Errors
    /// [`CliError::Config`] naming the file, line and key for malformed TOML, unknown keys and
    /// wrong types.
    pub fn from_toml(file: &Path, text: &str) -> Result<Config, CliError> {
        toml::from_str(text).map_err(|e| CliError::Config {
            file: file.to_path_buf(),
            message: e.to_string().trim_end().to_owned(),
            source: None,
        })
    }

    /// Loads the configuration: `explicit` (from `--config` / `VNFM_CONFIG`) must exist;
    /// otherwise `./vnfm.toml` is read when present; otherwise the defaults.
    ///
    /// # Errors
    /// An unreadable or invalid file.
    pub fn load(explicit: Option<&Path>) -> Result<(Config, Option<PathBuf>), CliError> {
        let path = match explicit {
            Some(p) => Some(p.to_path_buf()),
            None => {
                let p = PathBuf::from("vnfm.toml");
                p.is_file().then_some(p)
            }
        };
        let Some(path) = path else {
            return Ok((Config::default(), None));
        };
        let text = std::fs::read_to_string(&path).map_err(|e| CliError::Config {
            file: path.clone(),
            message: "cannot read the configuration file".into(),
            source: Some(e),
        })?;
        Ok((Config::from_toml(&path, &text)?, Some(path)))
    }

    /// Applies command-line / environment overrides.
    pub fn with_overrides(mut self, o: &Overrides) -> Config {
        if let Some(v) = o.vim {
            self.vim.kind = v;
        }
        if let Some(c) = &o.cloud {
            self.vim.cloud = Some(c.clone());
        }
        if let Some(s) = o.sim_seed {
            self.vim.seed = s;
        }
        if let Some(d) = &o.packages_dir {
            self.packages.dir = Some(d.clone());
        }
        if let Some(s) = &o.state {
            self.state.path = Some(s.clone());
        }
        self
    }

    /// The state file: the configured path, else `$XDG_STATE_HOME/vnfm/state.sqlite`, else
    /// `$HOME/.local/state/vnfm/state.sqlite`, else `./vnfm-state.sqlite`.
    pub fn state_path(&self) -> PathBuf {
        if let Some(p) = &self.state.path {
            return p.clone();
        }
        default_state_path(
            std::env::var_os("XDG_STATE_HOME").map(PathBuf::from),
            std::env::var_os("HOME").map(PathBuf::from),
        )
    }
}

fn default_state_path(xdg: Option<PathBuf>, home: Option<PathBuf>) -> PathBuf {
    match (xdg.filter(|p| p.is_absolute()), home) {
        (Some(x), _) => x.join("vnfm").join("state.sqlite"),
        (None, Some(h)) => h
            .join(".local")
            .join("state")
            .join("vnfm")
            .join("state.sqlite"),
        (None, None) => PathBuf::from("vnfm-state.sqlite"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let c = Config::from_toml(Path::new("v.toml"), "").unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.vim.kind, VimKind::Sim);
        let c = Config::from_toml(
            Path::new("v.toml"),
            "[vim]\nkind = \"sim\"\ncloud = \"c.yaml\"\nseed = 3\n[state]\npath = \"s.db\"\n",
        )
        .unwrap();
        assert_eq!(c.vim.cloud.as_deref(), Some(Path::new("c.yaml")));
        assert_eq!(c.vim.seed, 3);
        let c = c.with_overrides(&Overrides {
            state: Some("other.db".into()),
            sim_seed: Some(9),
            ..Overrides::default()
        });
        assert_eq!(c.state_path(), PathBuf::from("other.db"));
        assert_eq!(c.vim.seed, 9);
        assert_eq!(c.vim.cloud.as_deref(), Some(Path::new("c.yaml")));
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let e = Config::from_toml(Path::new("v.toml"), "[vim]\nkindd = \"sim\"\n").unwrap_err();
        let s = e.to_string();
        assert!(s.contains("v.toml"), "{s}");
        assert!(s.contains("line 2"), "{s}");
        assert!(s.contains("kindd"), "{s}");
    }

    #[test]
    fn bad_vim_kind_lists_the_accepted_values() {
        let e = Config::from_toml(Path::new("v.toml"), "[vim]\nkind = \"aws\"\n").unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains("aws") && s.contains("sim") && s.contains("openstack"),
            "{s}"
        );
    }

    #[test]
    fn default_state_path_rules() {
        assert_eq!(
            default_state_path(Some("/x".into()), Some("/h".into())),
            PathBuf::from("/x/vnfm/state.sqlite")
        );
        assert_eq!(
            default_state_path(Some("rel".into()), Some("/h".into())),
            PathBuf::from("/h/.local/state/vnfm/state.sqlite")
        );
        assert_eq!(
            default_state_path(None, None),
            PathBuf::from("vnfm-state.sqlite")
        );
    }
}
