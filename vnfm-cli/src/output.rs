//! Where output goes: data to stdout (human text or JSON), diagnostics and progress to stderr.
//!
//! Progress lines are shown only when stderr is a terminal and neither `--json` nor `--quiet`
//! is given. Every JSON document printed is a [`Report`] of `crate::report`, with its
//! `version` field.
//! Human text and diagnostics have their control characters escaped (`crate::display`); JSON
//! is printed exact.

use std::io::{IsTerminal, Write};

use crate::display::escape_text;
use crate::error::CliError;
use crate::report::Report;

/// How data is printed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Human-readable text.
    #[default]
    Human,
    /// One JSON document (or JSON Lines for streams).
    Json,
}

/// The output settings of one run.
#[derive(Clone, Copy, Debug)]
pub struct Output {
    /// Data format.
    pub format: Format,
    /// `--quiet`: no progress, no diagnostics except errors.
    pub quiet: bool,
    progress: bool,
}

impl Output {
    /// Output settings; progress is enabled only on a terminal in human mode without `--quiet`.
    pub fn new(format: Format, quiet: bool) -> Self {
        let progress = format == Format::Human && !quiet && std::io::stderr().is_terminal();
        Self {
            format,
            quiet,
            progress,
        }
    }

    /// Whether progress lines are shown (a terminal, human mode, no `--quiet`).
    pub fn shows_progress(&self) -> bool {
        self.progress
    }

    /// Prints a progress line on stderr (only on a terminal, see the module docs).
    pub fn progress(&self, line: &str) {
        if self.progress {
            eprintln!("{}", escape_text(line));
        }
    }

    /// Prints a diagnostic on stderr unless `--quiet`.
    pub fn note(&self, line: &str) {
        if !self.quiet {
            eprintln!("{}", escape_text(line));
        }
    }

    /// Prints `human` in human mode (its control characters but line feeds and tabs escaped),
    /// or the serde form of `report` (pretty JSON, with its `version`) in JSON mode, on stdout.
    ///
    /// # Errors
    /// [`CliError::Output`] when stdout cannot be written (a closed pipe is not an error: the
    /// caller exits 0, see [`is_broken_pipe`]).
    pub fn data<R: Report>(&self, human: &str, report: &R) -> Result<(), CliError> {
        match self.format {
            Format::Human => write_stdout(&escape_text(human)),
            Format::Json => {
                let mut s = serde_json::to_string_pretty(report).map_err(|e| {
                    CliError::Output(std::io::Error::other(format!("cannot encode JSON: {e}")))
                })?;
                s.push('\n');
                write_stdout(&s)
            }
        }
    }
}

fn write_stdout(s: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    out.write_all(s.as_bytes())
        .and_then(|()| out.flush())
        .map_err(CliError::Output)
}

/// True when `e` is a write to a closed pipe (then `vnfm` exits 0, as `head` expects).
pub fn is_broken_pipe(e: &CliError) -> bool {
    matches!(e, CliError::Output(io) if io.kind() == std::io::ErrorKind::BrokenPipe)
}
