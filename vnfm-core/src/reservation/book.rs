//! Where the ledger an operation draws from is kept: the [`ReservationBook`] driver trait.
//!
//! The core decides what an operation draws from a reservation, what it keeps and what it
//! gives back ([`super::lcm`]); [`crate::lifecycle::Lifecycle::start`] asks a book to apply
//! those decisions to the ledger it keeps (a state file, a server's ledger, a database) and to
//! save it. A book decides nothing.

use std::fmt::Debug;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Ledger, LedgerError};
use crate::id::IdGen;

/// A change of the ledger that the core decided, applied at the book's time: it says whether
/// it changed the ledger (what must be saved).
pub type LedgerChange<'a> = Box<
    dyn FnOnce(&mut Ledger, &mut IdGen, DateTime<Utc>) -> Result<bool, LedgerError> + Send + 'a,
>;

/// Why a [`ReservationBook`] did not apply a change.
#[derive(Debug, thiserror::Error)]
pub enum BookError {
    /// There is no ledger at all (nothing was ever reserved); the change did not run.
    #[error("there is no reservation ledger")]
    NoLedger,
    /// The change refused (the ledger said no); what fell due by the book's time was saved.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// The ledger could not be read or saved.
    #[error("the reservation ledger is unusable: {0}")]
    Unusable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Keeps the Promise ledger an operation draws from.
///
/// # Contract
/// - [`ReservationBook::apply`] runs `change` once, on the ledger as it is now (another
///   writer's changes included), at the book's time: the clock's (or a time the user gave),
///   never before the ledger's last operation ([`super::lcm::effective_now`]).
/// - When `change` says it changed the ledger, or refuses (the transitions due by that time
///   happened), the ledger is saved before `apply` returns.
/// - Without a ledger, `apply` returns [`BookError::NoLedger`] and does not run `change`.
#[async_trait]
pub trait ReservationBook: Send + Sync + Debug {
    /// Applies `change` to the ledger and saves it (see the contract).
    ///
    /// # Errors
    /// [`BookError::Ledger`] for the change's refusal, [`BookError::NoLedger`] and
    /// [`BookError::Unusable`] as named.
    async fn apply(&self, change: LedgerChange<'_>) -> Result<(), BookError>;
}

/// Applies `change` through `book` and returns its result: `change` gives a value and whether
/// it changed the ledger.
///
/// # Errors
/// As [`ReservationBook::apply`].
pub async fn apply_with<T: Send>(
    book: &dyn ReservationBook,
    change: impl FnOnce(&mut Ledger, &mut IdGen, DateTime<Utc>) -> Result<(T, bool), LedgerError> + Send,
) -> Result<T, BookError> {
    let mut out = None;
    let slot = &mut out;
    book.apply(Box::new(move |ledger, ids, now| {
        let (v, changed) = change(ledger, ids, now)?;
        *slot = Some(v);
        Ok(changed)
    }))
    .await?;
    out.ok_or_else(|| {
        BookError::Unusable("the reservation book returned without applying the change".into())
    })
}
