//! # vnfm-cli
//!
//! The library half of the `vnfm` command-line program: the pieces the binary wires together
//! and that embedders may reuse.
//!
//! - [`store`]: [`store::SqliteStore`], the persistent [`vnfm_core::driver::Store`] the CLI
//!   keeps its state in (VNF instances and LCM operation occurrences in one SQLite file).

pub mod store;
