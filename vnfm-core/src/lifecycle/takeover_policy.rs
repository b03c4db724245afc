//! The take-over policy (`[state] takeover`), in a file of its own that imports nothing, so
//! that the configuration ([`super::types`]) names it without depending on the decision
//! ([`super::takeover`], which re-exports it).

/// How many times an occurrence is resumed at most under [`Takeover::Resume`] by default.
pub const DEFAULT_RESUME_LIMIT: u32 = 3;

/// What is done with an occurrence whose owner went away (`[state] takeover`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Takeover {
    /// `FAILED_TEMP` with `failureKind: INTERRUPTED` (the default).
    #[default]
    Interrupt,
    /// Run on where its progress says, at most `limit` times per occurrence (then
    /// interrupted).
    Resume {
        /// Take-overs per occurrence at most.
        limit: u32,
    },
}
