//! One way to start an operation: [`Lifecycle::start`] with an [`OpRequest`], used alike by
//! the CLI, `vnfm serve` and its alert handler.
//!
//! Besides running the operation, `start` carries out the reservation flow the core decides
//! ([`crate::reservation::lcm`]): an instantiate or a scale-out whose `additionalParams` name
//! a reservation ([`crate::reservation::lcm::RESERVATION_PARAM`]) is granted first
//! ([`Lifecycle::grant_only`]), draws its new VNFCs from the reservation, runs pinned to the
//! granted zones, and the allocations are settled after it (kept for the VNFCs placed in the
//! reservation's zone, destroyed otherwise); an operation that ended gives back what it
//! releases (a scale-in the allocations of the VNFCs it removed, a terminate all of them).
//! The ledger is kept by the caller's [`ReservationBook`], which applies those decisions and
//! saves it.

use super::change_ext_conn::ChangeExtVnfConnectivityRequest;
use super::change_flavour::ChangeVnfFlavourRequest;
use super::engine::Lifecycle;
use super::operate::OperateVnfRequest;
use super::to_level::ScaleVnfToLevelRequest;
use super::types::{GrantOnly, LcmError, OperationOptions, OperationReport};
use super::FailureKind;
use crate::error::Error;
use crate::id::VnfInstanceId;
use crate::lcm::{
    HealVnfRequest, InstantiateVnfRequest, ScaleVnfRequest, TerminateVnfRequest, VnfInstance,
};
use crate::package::VnfPackage;
use crate::reservation::book::{apply_with, BookError, ReservationBook};
use crate::reservation::lcm::{self as rlcm, Draw};
use crate::reservation::{Allocation, ReservationId};

/// An LCM operation asked of an instance: the SOL003 request of each task that starts one.
#[derive(Debug, Clone)]
pub enum OpRequest {
    /// `INSTANTIATE`.
    Instantiate(Box<InstantiateVnfRequest>),
    /// `SCALE`.
    Scale(ScaleVnfRequest),
    /// `HEAL`.
    Heal(HealVnfRequest),
    /// `TERMINATE`.
    Terminate(TerminateVnfRequest),
    /// `SCALE_TO_LEVEL`.
    ScaleToLevel(ScaleVnfToLevelRequest),
    /// `OPERATE`.
    Operate(OperateVnfRequest),
    /// `CHANGE_FLAVOUR`.
    ChangeFlavour(Box<ChangeVnfFlavourRequest>),
    /// `CHANGE_EXT_CONN`.
    ChangeExtConn(Box<ChangeExtVnfConnectivityRequest>),
}

impl OpRequest {
    /// The name of its SOL003 request type (`InstantiateVnfRequest`, ...), as errors name it.
    pub fn request_name(&self) -> &'static str {
        match self {
            Self::Instantiate(_) => "InstantiateVnfRequest",
            Self::Scale(_) => "ScaleVnfRequest",
            Self::Heal(_) => "HealVnfRequest",
            Self::Terminate(_) => "TerminateVnfRequest",
            Self::ScaleToLevel(_) => "ScaleVnfToLevelRequest",
            Self::Operate(_) => "OperateVnfRequest",
            Self::ChangeFlavour(_) => "ChangeVnfFlavourRequest",
            Self::ChangeExtConn(_) => "ChangeExtVnfConnectivityRequest",
        }
    }

    /// Whether the operation needs the instance's package (all but terminate and operate).
    pub fn needs_package(&self) -> bool {
        !matches!(self, Self::Terminate(_) | Self::Operate(_))
    }

    /// The reservation the request draws from (`additionalParams.reservationId`), and what to
    /// grant for it: only an instantiate and a scale-out draw.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming `<request>.additionalParams.reservationId` when it is not a
    /// reservation id, or is named on an operation that adds no VNFC.
    pub fn reservation(&self) -> Result<Option<(ReservationId, GrantOnly)>, Error> {
        let params = match self {
            Self::Instantiate(req) => return rlcm::instantiate_draw(req),
            Self::Scale(req) => return rlcm::scale_draw(req),
            Self::Heal(req) => req.additional_params.as_ref(),
            Self::Terminate(req) => req.additional_params.as_ref(),
            Self::ScaleToLevel(req) => req.additional_params.as_ref(),
            Self::Operate(req) => req.additional_params.as_ref(),
            Self::ChangeFlavour(req) => req.additional_params.as_ref(),
            Self::ChangeExtConn(req) => req.additional_params.as_ref(),
        };
        rlcm::no_reservation(params, self.request_name()).map(|()| None)
    }
}

/// How [`Lifecycle::start`] runs an operation.
#[derive(Clone, Debug, Default)]
pub struct StartOptions<'a> {
    /// The operation's own options (pins, interrupt, `isAutomaticInvocation`); a draw from a
    /// reservation replaces the pins with the granted zones.
    pub operation: OperationOptions,
    /// The ledger a reservation is drawn from and given back to; without one, a request that
    /// names a reservation is refused.
    pub book: Option<&'a dyn ReservationBook>,
    /// The instance was created for this operation (an instantiate): deleted again when the
    /// operation is refused before it starts (a refused draw, a bad pin), as if never made.
    pub delete_on_refusal: bool,
}

/// An operation that ran, with what it drew from and gave back to the ledger.
#[derive(Debug)]
pub struct Started {
    /// The operation's report.
    pub report: OperationReport,
    /// The allocations it keeps from the reservation it drew from (none if it drew nothing).
    pub kept: Vec<Allocation>,
    /// The allocations it gave back (a scale-in's removed VNFCs, a terminate's all).
    pub released: Vec<Allocation>,
    /// Why the ledger could not be settled or given back after the operation; the operation's
    /// result stands (the caller says so: a log line, an error after the report).
    pub ledger_failure: Option<BookError>,
}

/// Why [`Lifecycle::start`] did not run an operation.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The lifecycle refused it (not found, conflict, invalid, the store).
    #[error(transparent)]
    Lcm(#[from] LcmError),
    /// The local granter gives no grant to draw from the reservation with.
    #[error("no grant to draw from reservation {reservation}: {detail}")]
    NoGrant {
        /// The reservation named.
        reservation: ReservationId,
        /// Why, as an operation's failure would say.
        kind: FailureKind,
        /// The granter's words.
        detail: String,
    },
    /// The reservation gives nothing (the ledger refused, or there is none).
    #[error("cannot draw from reservation {reservation}: {error}")]
    Draw {
        /// The reservation named.
        reservation: ReservationId,
        /// The book's refusal.
        #[source]
        error: BookError,
    },
}

impl Lifecycle {
    /// Starts `request` on instance `id` and runs it to its end, drawing from and giving back
    /// to `opts.book`'s ledger as the core decides (see the module docs). `pkg` is the
    /// instance's package (as realised, for an instance deployed with an intent); terminate
    /// and operate run without one.
    ///
    /// # Errors
    /// [`StartError::Lcm`] as the operation's own entry ([`Lifecycle::instantiate`], ...) or
    /// for a reservation named where none can be drawn; [`StartError::NoGrant`] and
    /// [`StartError::Draw`] when a draw is refused (nothing ran).
    pub async fn start(
        &self,
        id: &VnfInstanceId,
        request: OpRequest,
        pkg: Option<&VnfPackage>,
        opts: &StartOptions<'_>,
    ) -> Result<Started, StartError> {
        let wanted = request.reservation().map_err(LcmError::Invalid)?;
        let pkg = match pkg {
            Some(p) => Some(p),
            None if request.needs_package() => return Err(LcmError::NotFound(id.clone()).into()),
            None => None,
        };
        // The instance before the operation: what a draw grants for and what a scale-in
        // removed; a terminate gives back everything and needs none.
        let before = match (&request, opts.book) {
            (OpRequest::Terminate(_), _) | (_, None) => None,
            _ => Some(self.load(id).await?.value),
        };
        let mut operation = opts.operation.clone();
        let drawn = match (wanted, &before, pkg) {
            (Some((rid, op)), Some(inst), Some(pkg)) => {
                match self.draw(opts.book, pkg, inst, op, &rid).await {
                    Ok(d) => {
                        operation.pinned.clone_from(&d.pinned);
                        Some(d)
                    }
                    Err(e) => return Err(self.refused(id, &request, opts, e).await),
                }
            }
            (Some((reservation, _)), _, _) => {
                return Err(StartError::Draw {
                    reservation,
                    error: BookError::NoLedger,
                })
            }
            (None, _, _) => None,
        };
        let is_instantiate = matches!(request, OpRequest::Instantiate(_));
        let r = self.run_request(id, request, pkg, &operation).await;
        if r.is_err() && is_instantiate && opts.delete_on_refusal {
            self.delete(id).await?;
        }
        match opts.book {
            Some(book) => Ok(settle_and_release(book, drawn, r, before.as_ref()).await?),
            None => Ok(Started {
                report: r?,
                kept: Vec::new(),
                released: Vec::new(),
                ledger_failure: None,
            }),
        }
    }

    /// Grants `op` of `inst` with the local granter and draws its new VNFCs placed in the
    /// zone of reservation `rid` from it, in `book`'s ledger (saved at once).
    async fn draw(
        &self,
        book: Option<&dyn ReservationBook>,
        pkg: &VnfPackage,
        inst: &VnfInstance,
        op: GrantOnly,
        rid: &ReservationId,
    ) -> Result<Draw, StartError> {
        let Some(book) = book else {
            return Err(StartError::Draw {
                reservation: rid.clone(),
                error: BookError::NoLedger,
            });
        };
        let granted = match self.grant_only(pkg, inst, op).await? {
            Ok(g) => g,
            Err((_, kind, detail)) => {
                return Err(StartError::NoGrant {
                    reservation: rid.clone(),
                    kind,
                    detail,
                })
            }
        };
        apply_with(book, move |l, ids, now| {
            rlcm::draw_operation(l, ids, pkg, inst, granted, rid, now).map(|d| (d, true))
        })
        .await
        .map_err(|error| StartError::Draw {
            reservation: rid.clone(),
            error,
        })
    }

    /// `e`, after deleting an instance created for a refused instantiate.
    async fn refused(
        &self,
        id: &VnfInstanceId,
        request: &OpRequest,
        opts: &StartOptions<'_>,
        e: StartError,
    ) -> StartError {
        if opts.delete_on_refusal && matches!(request, OpRequest::Instantiate(_)) {
            if let Err(d) = self.delete(id).await {
                return d.into();
            }
        }
        e
    }

    /// Runs `request` through its own entry.
    async fn run_request(
        &self,
        id: &VnfInstanceId,
        request: OpRequest,
        pkg: Option<&VnfPackage>,
        opts: &OperationOptions,
    ) -> Result<OperationReport, LcmError> {
        let missing = || LcmError::NotFound(id.clone());
        match request {
            OpRequest::Instantiate(req) => {
                self.instantiate(id, pkg.ok_or_else(missing)?, &req, opts)
                    .await
            }
            OpRequest::Scale(req) => self.scale(id, pkg.ok_or_else(missing)?, &req, opts).await,
            OpRequest::Heal(req) => self.heal(id, pkg.ok_or_else(missing)?, &req, opts).await,
            OpRequest::ScaleToLevel(req) => {
                self.scale_to_level(id, pkg.ok_or_else(missing)?, &req, opts)
                    .await
            }
            OpRequest::Terminate(req) => self.terminate(id, &req, opts).await,
            OpRequest::Operate(req) => self.operate(id, &req, opts).await,
            OpRequest::ChangeFlavour(req) => {
                self.change_flavour(id, pkg.ok_or_else(missing)?, &req, opts)
                    .await
            }
            OpRequest::ChangeExtConn(req) => {
                self.change_ext_conn(id, pkg.ok_or_else(missing)?, &req, opts)
                    .await
            }
        }
    }
}

/// After an operation: settles what it drew (kept for the VNFCs placed in the reservation's
/// zone, destroyed otherwise, all of them when it failed or did not start), then gives back
/// what an operation that ran releases; `before` is the instance before it.
async fn settle_and_release(
    book: &dyn ReservationBook,
    drawn: Option<Draw>,
    r: Result<OperationReport, LcmError>,
    before: Option<&VnfInstance>,
) -> Result<Started, LcmError> {
    let (kept, mut ledger_failure) = match drawn {
        Some(draw) => {
            let report = r.as_ref().ok();
            let settled = apply_with(book, move |l, _, now| {
                rlcm::settle(l, draw, report, now).map(|s| (s, true))
            })
            .await;
            match settled {
                Ok(s) => (s.kept, None),
                Err(e) => (Vec::new(), Some(e)),
            }
        }
        None => (Vec::new(), None),
    };
    let report = r?;
    let released = {
        let report = &report;
        apply_with(book, move |l, _, now| {
            rlcm::release_after(l, before, report, now).map(|r| {
                let changed = !r.is_empty();
                (r, changed)
            })
        })
        .await
    };
    let released = match released {
        Ok(r) => r,
        Err(BookError::NoLedger) => Vec::new(),
        Err(e) => {
            ledger_failure.get_or_insert(e);
            Vec::new()
        }
    };
    Ok(Started {
        report,
        kept,
        released,
        ledger_failure,
    })
}
