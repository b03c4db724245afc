//! The OPNFV Promise commands over the ledger of the state file: `vnfm reservation`,
//! `vnfm allocation`, `vnfm capacity` and `vnfm provider`; and the wiring of `instantiate`,
//! `scale` and `terminate` to reservations.
//!
//! Each command loads the ledger ([`crate::promise`]; the same document `vnfm serve` uses),
//! advances it to `--now` (default: the clock, never before the ledger's last operation), runs
//! one ledger operation, saves the ledger (also when the operation was refused: what fell due
//! by `--now` happened) and prints the result with the events it caused (reservations that
//! started, expired, were preempted, ...).
//!
//! # JSON (`--json`: a `crate::report::LedgerReport`, or a `crate::report::ConflictReport`
//! for a request that does not fit; every document also carries `"version": 1`)
//! - `reservation create`: `{"result": "ok", "reservationId", "reservation"}`; when it does not
//!   fit, exit 4 with `{"result": "conflict", "message", "offer": {"max": {<amounts>},
//!   "earliestStart", "earliestEnd"}}` on stdout (`earliestStart` / `earliestEnd` null when
//!   no window of that length fits within the policy's ranges). `reservation update` answers
//!   the same way (`reservationId` of the updated one).
//! - `reservation cancel`: `{"result": "ok", "reservation"}`; `show`: `{"reservation"}`;
//!   `query`: `{"reservations": [...], "utilization": [...]}`.
//! - `allocation create`: `{"result": "ok", "allocationId", "allocation", "reservation"}`
//!   (`reservation` when drawn from one); `destroy`: `{"result": "ok", "allocation"}`.
//! - `capacity query --zone Z`: `{"zone", "window": {"start", "end"}, "total", "reserved",
//!   "used", "available"}`, each figure an object of amounts at its worst instant of the
//!   window; without `--zone`: `{"zones": [<that object per zone>]}`; with `--utilization`:
//!   `{"zone", "window", "utilization": [{"timestamp", "total", "reserved", "used",
//!   "available"}]}`.
//! - `capacity increase|decrease`: `{"result": "ok", "pool"}`; `capacity fit`: `{"fit":
//!   [{"zone", "count"}]}`.
//! - `provider add`: `{"result": "ok", "provider": {"name", "zones", "pools"}, "pools"}`;
//!   `provider list`: `{"providers": [...]}`.
//! - Every document has `"events"` when the command caused some.
//!
//! # Instantiate and scale drawing from a reservation
//! `instantiate --reservation ID` and `scale --type out --reservation ID` ask the local granter
//! for the operation's grant first ([`vnfm_core::lifecycle::Lifecycle::grant_only`]) and draw
//! the new VNFCs it places in the reservation's zone from the reservation
//! ([`vnfm_core::reservation::lcm::draw_operation`]: all or nothing, one allocation per VNFC,
//! `instanceRef` `<vnfInstanceId>/<VNFC>`). When the draw is refused nothing is created (a new
//! instance is deleted again). Otherwise the operation runs with every new VNFC pinned to the
//! zone of that grant; if it fails, its allocations are destroyed, and a VNFC that reselection
//! moved out of the reservation's zone gives its allocation back ([`crate::promise::settle`]). A scale-in
//! destroys the allocations of the VNFCs it removed, and a terminate those of the instance
//! ([`crate::promise::release_after`]); a heal keeps them (a healed VNFC keeps its name). The decisions are the
//! core's ([`vnfm_core::reservation::lcm`], shared with `vnfm serve`); this module loads and
//! saves the ledger around them.

use std::fmt::Write as _;

use chrono::{DateTime, Duration, Utc};
use vnfm_core::id::ZoneId;
use vnfm_core::reservation::{
    Allocation, AllocationId, AllocationRequest, Capacity, CapacityReport, CounterOffer,
    ElementsFilter, Event, Ledger, LedgerError, PoolRequest, Priority, QueryWindow, Reservation,
    ReservationId, ReservationQuery, ReservationRequest, ReservationUpdate, ResourceLine, Scope,
    Window, ZoneFit,
};

use crate::app::{check_vim, open_state, runtime};
use crate::cli::{
    AllocationArgs, AllocationCommand, AmountArgs, CapacityArgs, CapacityCommand, NowArgs,
    PriorityArg, ProviderArgs, ProviderCommand, ReservationArgs, ReservationCommand, ScopeArg,
};
use crate::config::Config;
use crate::error::CliError;
use crate::output::Output;
use crate::promise::{self, effective_now, unknown_reservation, PromiseBook, DECLARED_PROVIDER};
use crate::render::promise::amounts;
use crate::report::{
    ConflictReport, LedgerBody, LedgerReport, LedgerResult, UtilizationLine, Version, ZoneCapacity,
};

impl AmountArgs {
    /// The amounts as a ledger [`Capacity`] (unset lines zero).
    pub fn capacity(&self) -> Capacity {
        self.over(Capacity::default())
    }

    /// `base` with the lines given replaced.
    pub fn over(&self, base: Capacity) -> Capacity {
        let mut c = base;
        for (line, v) in self.given() {
            c.set(line, v);
        }
        c
    }

    /// The lines given, with their amounts.
    pub fn given(&self) -> Vec<(ResourceLine, u64)> {
        [
            (ResourceLine::Cores, self.cores),
            (ResourceLine::Ram, self.ram),
            (ResourceLine::Instances, self.instances),
            (ResourceLine::Addresses, self.addresses),
            (ResourceLine::Volumes, self.volumes),
            (ResourceLine::Size, self.size),
            (ResourceLine::Snapshots, self.snapshots),
        ]
        .into_iter()
        .filter_map(|(l, v)| v.map(|v| (l, v)))
        .collect()
    }
}

impl From<PriorityArg> for Priority {
    fn from(p: PriorityArg) -> Self {
        match p {
            PriorityArg::High => Priority::High,
            PriorityArg::Normal => Priority::Normal,
            PriorityArg::Low => Priority::Low,
        }
    }
}

impl From<ScopeArg> for Scope {
    fn from(s: ScopeArg) -> Self {
        match s {
            ScopeArg::Inclusive => Scope::Inclusive,
            ScopeArg::Exclusive => Scope::Exclusive,
        }
    }
}

/// What a ledger command answers: the human text and the report (`--json`).
#[derive(Debug)]
pub struct LedgerAnswer {
    /// Human-readable text (without the events).
    pub human: String,
    /// The report, with the events the command caused (in time order).
    pub report: LedgerReport,
}

impl LedgerAnswer {
    /// The answer of a command that changed the ledger (`"result": "ok"`).
    fn ok(human: String, body: LedgerBody, events: Vec<Event>) -> Self {
        LedgerAnswer {
            human,
            report: LedgerReport {
                result: Some(LedgerResult::Ok),
                body,
                events,
                version: Version,
            },
        }
    }

    /// The answer of a read (no `result`, no events of its own).
    fn data(human: String, body: LedgerBody) -> Self {
        LedgerAnswer {
            human,
            report: LedgerReport {
                result: None,
                body,
                events: Vec::new(),
                version: Version,
            },
        }
    }

    /// The human text with the events.
    pub fn text(&self) -> String {
        let mut s = self.human.clone();
        if !self.report.events.is_empty() {
            s.push_str("events:\n");
            for e in &self.report.events {
                let _ = writeln!(s, "  {}", human_event(e));
            }
        }
        s
    }
}

/// Loads the ledger, advances it to `now`, runs `f`, saves, prints. A counter-offer of a
/// refused reservation is printed on stdout before the error is returned.
fn with_book(
    config: &Config,
    now: &NowArgs,
    out: Output,
    needs_provider: bool,
    f: impl FnOnce(&mut PromiseBook, DateTime<Utc>) -> Result<LedgerAnswer, CliError>,
) -> Result<(), CliError> {
    with_book_as(config, now, out, needs_provider, Access::Write, f)
}

/// Whether a ledger command changes the ledger: a read (show, query, fit, list) answers at its
/// `--now` without saving, so a query about a far future moves no clock.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    Write,
}

fn with_book_as(
    config: &Config,
    now: &NowArgs,
    out: Output,
    needs_provider: bool,
    access: Access,
    f: impl FnOnce(&mut PromiseBook, DateTime<Utc>) -> Result<LedgerAnswer, CliError>,
) -> Result<(), CliError> {
    check_vim(config)?;
    runtime()?.block_on(async {
        let store = open_state(config).await?;
        let mut book = promise::load_or_new(&store, config).await?;
        if needs_provider && book.ledger.zones().is_empty() {
            return Err(no_provider(config));
        }
        let at = effective_now(now.now, &book.ledger, crate::app::clock().as_ref());
        let advanced = book.ledger.advance_to(at);
        let result = advanced.map_err(CliError::from).and_then(|o| {
            let r = f(&mut book, at);
            r.map(|mut r| {
                let mut events = o.events;
                events.append(&mut r.report.events);
                r.report.events = events;
                r
            })
        });
        // Transitions due by `now` happened even when the request was refused: keep them. A
        // read keeps nothing: the ledger it answered from was advanced only in memory.
        if access == Access::Write {
            promise::save(&store, &book).await?;
        }
        match result {
            Ok(r) => out.data(&r.text(), &r.report),
            Err(e) => {
                if let CliError::Promise(LedgerError::DoesNotFit { offer, .. }) = &e {
                    let message = e.to_string();
                    out.data(&human_offer(offer), &ConflictReport::new(&message, offer))?;
                }
                Err(e)
            }
        }
    })
}

fn no_provider(config: &Config) -> CliError {
    CliError::Usage(format!(
        "the reservation ledger of {} has no capacity yet; register a provider first: `vnfm \
         provider add` (the simulated cloud's zones) or `vnfm provider add --declared --name \
         NAME --zone ZONE --cores N ...`",
        config.state_path().display()
    ))
}

fn human_offer(o: &CounterOffer) -> String {
    let mut s = String::from("does not fit; counter-offer:\n");
    let _ = writeln!(
        s,
        "  largest amount over the window: {}",
        amounts(&o.largest)
    );
    match &o.earliest {
        Some(w) => {
            let _ = writeln!(
                s,
                "  earliest window where it fits: {}",
                window(&w.start, w.end.as_ref())
            );
        }
        None => s.push_str("  no window of that length fits within the policy's ranges\n"),
    }
    s
}

fn reservation_of(ledger: &Ledger, id: &str) -> Result<Reservation, CliError> {
    ledger
        .reservation(&ReservationId::new(id))
        .ok_or_else(|| unknown_reservation(id))
}

fn human_reservations(rs: &[Reservation]) -> String {
    let mut s = String::new();
    for r in rs {
        human_reservation(&mut s, r);
    }
    s
}

/// `vnfm reservation ...`.
///
/// # Errors
/// [`CliError::Promise`] when the ledger refuses the request (exit 4 when it does not fit,
/// with the counter-offer on stdout; 2 for a bad request: unknown reservation, policy limit,
/// bad window); [`CliError::State`] for an unusable state file; [`CliError::Usage`] when no
/// provider was registered.
pub fn reservation(config: &Config, args: &ReservationArgs, out: Output) -> Result<(), CliError> {
    let needs = matches!(args.command, ReservationCommand::Create { .. });
    let access = match args.command {
        ReservationCommand::Show { .. } | ReservationCommand::Query { .. } => Access::Read,
        _ => Access::Write,
    };
    with_book_as(config, &args.now, out, needs, access, |book, now| {
        reservation_command(book, &args.command, now)
    })
}

/// Runs one `vnfm reservation` action on `book` at `now`.
///
/// # Errors
/// As [`reservation`].
pub fn reservation_command(
    book: &mut PromiseBook,
    command: &ReservationCommand,
    now: DateTime<Utc>,
) -> Result<LedgerAnswer, CliError> {
    let ledger = &mut book.ledger;
    match command {
        ReservationCommand::Create {
            zone,
            amounts,
            start,
            end,
            expiry,
            priority,
            elements,
            id,
        } => {
            let mut req = ReservationRequest::new(zone.as_str(), amounts.capacity())
                .with_priority((*priority).into())
                .with_elements(elements.clone());
            req.start = *start;
            req.end = *end;
            req.expiry = *expiry;
            req.id = id.as_deref().map(ReservationId::new);
            let o = ledger.create_reservation(req, &mut book.ids, now)?;
            let r = o.value;
            Ok(LedgerAnswer::ok(
                format!("reserved: {}", human_reservations(std::slice::from_ref(&r))),
                LedgerBody::Reserved {
                    reservation_id: r.id.to_string(),
                    reservation: r,
                },
                o.events,
            ))
        }
        ReservationCommand::Update {
            id,
            zone,
            amounts,
            start,
            end,
            expiry,
            elements,
        } => {
            let current = reservation_of(ledger, id)?;
            let given = amounts.given();
            let upd = ReservationUpdate {
                zone: zone.as_deref().map(ZoneId::new),
                capacity: (!given.is_empty()).then(|| amounts.over(current.capacity)),
                start: *start,
                end: *end,
                expiry: *expiry,
                elements: (!elements.is_empty()).then(|| elements.clone()),
            };
            if upd == ReservationUpdate::default() {
                return Err(CliError::Usage(format!(
                    "reservation update {id}: nothing to change; expected at least one of \
                     --zone, --cores ... --snapshots, --start, --end, --expiry, --element"
                )));
            }
            let o = ledger.update_reservation(&ReservationId::new(id.as_str()), upd, now)?;
            let r = o.value;
            Ok(LedgerAnswer::ok(
                format!("updated: {}", human_reservations(std::slice::from_ref(&r))),
                LedgerBody::Reserved {
                    reservation_id: r.id.to_string(),
                    reservation: r,
                },
                o.events,
            ))
        }
        ReservationCommand::Cancel { id } => {
            reservation_of(ledger, id)?;
            let o = ledger.cancel_reservation(&ReservationId::new(id.as_str()), now)?;
            let r = o.value;
            Ok(LedgerAnswer::ok(
                human_reservations(std::slice::from_ref(&r)),
                LedgerBody::Reservation { reservation: r },
                o.events,
            ))
        }
        ReservationCommand::Show { id } => {
            let r = reservation_of(ledger, id)?;
            Ok(LedgerAnswer::data(
                human_reservations(std::slice::from_ref(&r)),
                LedgerBody::Reservation { reservation: r },
            ))
        }
        ReservationCommand::Query {
            zone,
            start,
            end,
            scope,
            without,
            some,
            every,
            utilization,
        } => {
            let q = ReservationQuery {
                zone: zone.as_deref().map(ZoneId::new),
                window: start.map(|start| QueryWindow {
                    start,
                    end: *end,
                    scope: (*scope).into(),
                }),
                without: without.iter().map(ReservationId::new).collect(),
                elements: ElementsFilter {
                    some: some.clone(),
                    every: every.clone(),
                },
                show_utilization: *utilization,
            };
            let r = ledger.query_reservations(&q)?;
            let mut human = human_reservations(&r.reservations);
            if r.reservations.is_empty() {
                human.push_str("no reservations\n");
            }
            if let Some(points) = &r.utilization {
                human.push_str("utilization:\n");
                for p in points {
                    let _ = writeln!(
                        human,
                        "  from {}: {} reservation(s) holding {}",
                        time(&p.timestamp),
                        p.count,
                        amounts(&p.capacity)
                    );
                }
            }
            Ok(LedgerAnswer::data(human, LedgerBody::Reservations(r)))
        }
    }
}

/// `vnfm allocation ...`.
///
/// # Errors
/// [`CliError::Promise`] with the ledger's refusal: exit 4 when the reservation or the zone has
/// not enough, 2 otherwise (unknown or inactive reservation, another zone).
pub fn allocation(config: &Config, args: &AllocationArgs, out: Output) -> Result<(), CliError> {
    let needs = matches!(args.command, AllocationCommand::Create { .. });
    with_book(config, &args.now, out, needs, |book, now| {
        allocation_command(book, &args.command, now)
    })
}

/// Runs one `vnfm allocation` action on `book` at `now`.
///
/// # Errors
/// As [`allocation`].
pub fn allocation_command(
    book: &mut PromiseBook,
    command: &AllocationCommand,
    now: DateTime<Utc>,
) -> Result<LedgerAnswer, CliError> {
    match command {
        AllocationCommand::Create {
            reservation,
            zone,
            amounts,
            instance_ref,
            id,
        } => {
            let req = AllocationRequest {
                id: id.as_deref().map(AllocationId::new),
                reservation: reservation.as_deref().map(ReservationId::new),
                zone: zone.as_deref().map(ZoneId::new),
                capacity: amounts.capacity(),
                instance_ref: instance_ref.clone(),
            };
            let o = book.ledger.create_instance(req, &mut book.ids, now)?;
            let a = o.value;
            let r = match &a.reservation {
                Some(r) => Some(reservation_of(&book.ledger, r.as_str())?),
                None => None,
            };
            let mut human = human_allocation(&a);
            if let Some(r) = &r {
                human_reservation(&mut human, r);
            }
            Ok(LedgerAnswer::ok(
                human,
                LedgerBody::Allocated {
                    allocation_id: a.id.to_string(),
                    allocation: a,
                    reservation: r,
                },
                o.events,
            ))
        }
        AllocationCommand::Destroy { id } => {
            let aid = AllocationId::new(id.as_str());
            if book.ledger.allocation(&aid).is_none() {
                return Err(CliError::Usage(format!("allocation {id} does not exist")));
            }
            let o = book.ledger.destroy_instance(&aid, now)?;
            Ok(LedgerAnswer::ok(
                format!("destroyed {}", human_allocation(&o.value)),
                LedgerBody::Allocation {
                    allocation: o.value,
                },
                o.events,
            ))
        }
    }
}

fn human_allocation(a: &Allocation) -> String {
    format!(
        "allocation {} in zone {}{}: {}{}\n",
        a.id,
        a.zone,
        a.reservation
            .as_ref()
            .map(|r| format!(" from reservation {r}"))
            .unwrap_or_default(),
        amounts(&a.capacity),
        a.end
            .as_ref()
            .map(|e| format!(", ended {}", time(e)))
            .unwrap_or_default()
    )
}

/// `vnfm capacity ...`.
///
/// # Errors
/// [`CliError::Promise`] for an unknown zone or a bad window (exit 2), or a decrease that
/// reservations hold without `--force` (exit 4).
pub fn capacity(config: &Config, args: &CapacityArgs, out: Output) -> Result<(), CliError> {
    let access = match args.command {
        CapacityCommand::Query { .. } | CapacityCommand::Fit { .. } => Access::Read,
        _ => Access::Write,
    };
    with_book_as(config, &args.now, out, false, access, |book, now| {
        capacity_command(book, &args.command, now)
    })
}

/// The window of a query: `[start, end)`, by default from `now` for one hour.
///
/// # Errors
/// [`CliError::Usage`] when the default end (start + 1 h) is past the last representable
/// time: the flag and the value are named.
fn query_window(
    start: Option<DateTime<Utc>>,
    end: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<Window, CliError> {
    let from = start.unwrap_or(now);
    let end = match end {
        Some(e) => e,
        None => from.checked_add_signed(Duration::hours(1)).ok_or_else(|| {
            let (flag, value) = match start {
                Some(s) => ("--start", s),
                None => ("--now", now),
            };
            CliError::Usage(format!(
                "{flag} {}: the default end of the window (one hour later) is past the last \
                 time vnfm can represent; give an earlier time, or --end",
                value.to_rfc3339()
            ))
        })?,
    };
    Ok(Window::new(from, end))
}

/// Runs one `vnfm capacity` action on `book` at `now`.
///
/// # Errors
/// As [`capacity`].
pub fn capacity_command(
    book: &mut PromiseBook,
    command: &CapacityCommand,
    now: DateTime<Utc>,
) -> Result<LedgerAnswer, CliError> {
    let ledger = &mut book.ledger;
    match command {
        CapacityCommand::Query {
            zone,
            start,
            end,
            utilization,
        } => {
            let w = query_window(*start, *end, now)?;
            match (zone, utilization) {
                (Some(z), true) => {
                    let points = ledger.utilization(&ZoneId::new(z.as_str()), w)?;
                    let mut human = format!(
                        "zone {z} over {}: utilization\n  {:<24} {:<10} {:>10} {:>10} {:>10} {:>10}\n",
                        window(&w.start, w.end.as_ref()),
                        "from",
                        "line",
                        "total",
                        "reserved",
                        "used",
                        "available"
                    );
                    for p in &points {
                        for l in ResourceLine::ALL {
                            if p.total.get(l) == 0 && p.usage.get(l) == 0 {
                                continue;
                            }
                            let _ = writeln!(
                                human,
                                "  {:<24} {:<10} {:>10} {:>10} {:>10} {:>10}",
                                time(&p.timestamp),
                                l.name(),
                                p.total.get(l),
                                p.reserved.get(l),
                                p.usage.get(l),
                                p.available.get(l)
                            );
                        }
                    }
                    Ok(LedgerAnswer::data(
                        human,
                        LedgerBody::Utilization {
                            zone: z.clone(),
                            window: w,
                            utilization: points.into_iter().map(UtilizationLine::from).collect(),
                        },
                    ))
                }
                (Some(z), false) => {
                    let c = ledger.capacity(&ZoneId::new(z.as_str()), w)?;
                    Ok(LedgerAnswer::data(
                        human_capacity(std::slice::from_ref(&c)),
                        LedgerBody::Capacity(c.into()),
                    ))
                }
                (None, _) => {
                    let all = ledger.capacity_all(w)?;
                    let mut human = human_capacity(&all);
                    if all.is_empty() {
                        human.push_str(
                            "no zone has capacity; register a provider with `vnfm provider add`\n",
                        );
                    }
                    let zones = all.into_iter().map(ZoneCapacity::from).collect();
                    Ok(LedgerAnswer::data(human, LedgerBody::Zones { zones }))
                }
            }
        }
        CapacityCommand::Increase {
            zone,
            amounts: a,
            start,
            end,
            new_zone,
        } => {
            let known = ledger.zones();
            if !*new_zone && !known.iter().any(|z| z.as_str() == zone) {
                let known: Vec<&str> = known.iter().map(ZoneId::as_str).collect();
                return Err(CliError::Usage(format!(
                    "capacity increase --zone {zone:?}: the ledger has no zone {zone:?}; its \
                     zones are {}; give --new-zone to add it (or declare it with `vnfm provider \
                     add --declared --name NAME --zone ZONE ...`)",
                    if known.is_empty() {
                        "none yet".to_owned()
                    } else {
                        known.join(", ")
                    }
                )));
            }
            let mut req = PoolRequest::new(zone.as_str(), a.capacity())
                .with_window(start.unwrap_or(now), *end);
            req.source = Some(DECLARED_PROVIDER.into());
            let o = ledger.increase_capacity(req, &mut book.ids, now)?;
            Ok(LedgerAnswer::ok(
                human_pool(&o.value),
                LedgerBody::Pool { pool: o.value },
                o.events,
            ))
        }
        CapacityCommand::Decrease {
            zone,
            amounts: a,
            start,
            end,
            force,
        } => {
            let mut req = PoolRequest::new(zone.as_str(), a.capacity())
                .with_window(start.unwrap_or(now), *end)
                .with_force(*force);
            req.source = Some(DECLARED_PROVIDER.into());
            let o = ledger.decrease_capacity(req, &mut book.ids, now)?;
            Ok(LedgerAnswer::ok(
                human_pool(&o.value),
                LedgerBody::Pool { pool: o.value },
                o.events,
            ))
        }
        CapacityCommand::Fit {
            zone,
            amounts: a,
            start,
            end,
        } => {
            let w = query_window(*start, *end, now)?;
            let flavour = a.capacity();
            let fits = match zone {
                Some(z) => {
                    let zone = ZoneId::new(z.as_str());
                    let count = ledger.fit_count(&zone, &flavour, w)?;
                    vec![ZoneFit { zone, count }]
                }
                None => ledger.fit_counts(&flavour, w)?,
            };
            let mut human = format!(
                "instances of {} that fit over {}:\n",
                amounts(&flavour),
                window(&w.start, w.end.as_ref())
            );
            for f in &fits {
                let _ = writeln!(human, "  zone {:<10} {}", f.zone, f.count);
            }
            Ok(LedgerAnswer::data(human, LedgerBody::Fit { fit: fits }))
        }
    }
}

fn human_pool(p: &vnfm_core::reservation::Pool) -> String {
    format!(
        "pool {} in zone {}{}: {} {} over {}\n",
        p.id,
        p.zone,
        p.source
            .as_ref()
            .map(|s| format!(" (provider {s})"))
            .unwrap_or_default(),
        if p.decrease { "minus" } else { "plus" },
        amounts(&p.capacity),
        window(&p.start, p.end.as_ref())
    )
}

fn human_capacity(reports: &[CapacityReport]) -> String {
    let mut s = String::new();
    for c in reports {
        let _ = writeln!(
            s,
            "zone {} over {} (worst instant)",
            c.zone,
            window(&c.window.start, c.window.end.as_ref())
        );
        let _ = writeln!(
            s,
            "  {:<10} {:>10} {:>10} {:>10} {:>10}",
            "line", "total", "reserved", "used", "available"
        );
        for l in ResourceLine::ALL {
            let _ = writeln!(
                s,
                "  {:<10} {:>10} {:>10} {:>10} {:>10}",
                l.name(),
                c.total.get(l),
                c.reserved.get(l),
                c.usage.get(l),
                c.available.get(l)
            );
        }
    }
    s
}

/// `vnfm provider ...`.
///
/// # Errors
/// [`CliError::Usage`] when the zone catalogue is already registered; [`CliError::Promise`]
/// for amounts the ledger refuses; the simulated cloud's errors.
pub fn provider(config: &Config, args: &ProviderArgs, out: Output) -> Result<(), CliError> {
    // The zone catalogue is read first (the simulated cloud of the state file, saved there
    // when it is new, so that later operations run on the cloud whose zones were registered).
    let zones = match &args.command {
        ProviderCommand::Add {
            declared: false,
            cloud,
            ..
        } => {
            check_vim(config)?;
            Some(runtime()?.block_on(async {
                let store = open_state(config).await?;
                let vim = crate::vim::Vim::open(&store, cloud.as_deref(), config).await?;
                crate::vim::save_sim(&store, &vim.sim).await?;
                let zones = vim.list_zones().await?;
                if !zones.iter().any(|z| z.is_candidate() && z.free().is_some()) {
                    return Err(CliError::Usage(
                        "the VIM's zone catalogue reports no free capacity for any available \
                         zone (a real Nova's availability-zone API does not); declare the \
                         capacity with `vnfm provider add --declared --name NAME --zone ZONE ...`"
                            .into(),
                    ));
                }
                Ok::<_, CliError>(zones)
            })?)
        }
        _ => None,
    };
    let access = match args.command {
        ProviderCommand::List => Access::Read,
        _ => Access::Write,
    };
    with_book_as(
        config,
        &args.now,
        out,
        false,
        access,
        |book, now| match &args.command {
            ProviderCommand::List => {
                let providers = book.providers();
                let mut human = String::new();
                for p in &providers {
                    let zones: Vec<&str> = p.zones.iter().map(ZoneId::as_str).collect();
                    let _ = writeln!(
                        human,
                        "provider {}: zones {} ({} pool(s))",
                        p.name,
                        zones.join(", "),
                        p.pools
                    );
                }
                if providers.is_empty() {
                    human.push_str("no providers; register one with `vnfm provider add`\n");
                }
                Ok(LedgerAnswer::data(
                    human,
                    LedgerBody::Providers { providers },
                ))
            }
            ProviderCommand::Add {
                name,
                declared,
                zone,
                amounts: a,
                ..
            } => {
                let (pools, events) = if *declared {
                    let name = name.clone().unwrap_or_else(|| DECLARED_PROVIDER.into());
                    let zone = zone.clone().unwrap_or_default();
                    for (flag, value) in [("--name", &name), ("--zone", &zone)] {
                        if value.trim().is_empty() {
                            return Err(CliError::Usage(format!(
                                "provider add --declared {flag} {value:?}: empty; expected a \
                                 non-empty {}",
                                if flag == "--name" {
                                    "provider name"
                                } else {
                                    "zone name"
                                }
                            )));
                        }
                    }
                    let mut req =
                        PoolRequest::new(zone.as_str(), a.capacity()).with_window(now, None);
                    req.source = Some(name);
                    let o = book.ledger.increase_capacity(req, &mut book.ids, now)?;
                    (vec![o.value], o.events)
                } else {
                    if let Some(n) = name
                        .as_deref()
                        .filter(|n| *n != promise::CATALOGUE_PROVIDER)
                    {
                        return Err(CliError::Usage(format!(
                            "provider add --name {n:?}: the VIM's zone catalogue is the provider \
                             {:?}; give --declared --zone ZONE and amounts for a provider named \
                             {n:?}",
                            promise::CATALOGUE_PROVIDER
                        )));
                    }
                    if !a.given().is_empty() {
                        return Err(CliError::Usage(
                            "provider add: amount flags (--cores ...) need --declared and --zone; \
                             the zone catalogue gives its own amounts"
                                .into(),
                        ));
                    }
                    let o = book.add_catalogue(zones.as_deref().unwrap_or_default(), now)?;
                    (o.value, o.events)
                };
                let name = pools
                    .first()
                    .and_then(|p| p.source.clone())
                    .unwrap_or_else(|| promise::CATALOGUE_PROVIDER.into());
                let provider = book.providers().into_iter().find(|p| p.name == name);
                let mut human = String::new();
                for p in &pools {
                    human.push_str(&human_pool(p));
                }
                if pools.is_empty() {
                    human.push_str("the zone catalogue has no available zone with capacity\n");
                }
                Ok(LedgerAnswer::ok(
                    human,
                    LedgerBody::ProviderAdded { provider, pools },
                    events,
                ))
            }
        },
    )
}

fn time(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

fn window(start: &DateTime<Utc>, end: Option<&DateTime<Utc>>) -> String {
    format!(
        "[{}, {})",
        time(start),
        end.map_or_else(|| "forever".to_owned(), time)
    )
}

fn human_reservation(s: &mut String, r: &Reservation) {
    let _ = writeln!(
        s,
        "reservation {} in zone {}: {}, {:?} priority",
        r.id, r.zone, r.status, r.priority
    );
    let _ = writeln!(s, "  window: {}", window(&r.start, Some(&r.end)));
    if let Some(e) = &r.expiry {
        let _ = writeln!(
            s,
            "  expiry: {}{}",
            time(e),
            if r.released {
                " (unallocated released)"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(s, "  capacity: {}", amounts(&r.capacity));
    let _ = writeln!(s, "  allocated: {}", amounts(&r.allocated));
    let _ = writeln!(s, "  remaining: {}", amounts(&r.remaining));
    if let Some(by) = &r.preempted_by {
        let _ = writeln!(s, "  preempted by: {by}");
    }
}

fn human_event(e: &Event) -> String {
    let kind = serde_json::to_value(e)
        .ok()
        .and_then(|v| v.get("event").and_then(|k| k.as_str()).map(str::to_owned))
        .unwrap_or_else(|| "event".into());
    match e.reservation_id() {
        Some(r) => format!(
            "{} {kind}: reservation {r} in zone {}",
            time(&e.at()),
            e.zone()
        ),
        None => format!("{} {kind}: zone {}", time(&e.at()), e.zone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};
    use vnfm_core::zone::{ComputeHost, ComputeZone, Resources};

    fn t(h: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + h * 3600, 0).unwrap()
    }

    /// The `--json` document of an answer.
    fn doc(r: &LedgerAnswer) -> Value {
        serde_json::to_value(&r.report).unwrap()
    }

    fn book() -> PromiseBook {
        let zone = ComputeZone {
            name: "AZ-1".into(),
            available: true,
            hosts: Some(vec![ComputeHost {
                name: "h1".into(),
                available: true,
                free: Some(Resources::new(8, 16384, 100)),
            }]),
        };
        PromiseBook::from_catalogue(&[zone], 7, t(0)).unwrap()
    }

    fn amounts_of(cores: u64, ram: u64) -> AmountArgs {
        AmountArgs {
            cores: Some(cores),
            ram: Some(ram),
            ..Default::default()
        }
    }

    fn create(cores: u64, start: i64, end: i64, id: Option<&str>) -> ReservationCommand {
        ReservationCommand::Create {
            zone: "AZ-1".into(),
            amounts: amounts_of(cores, 1024),
            start: Some(t(start)),
            end: Some(t(end)),
            expiry: None,
            priority: PriorityArg::Normal,
            elements: Vec::new(),
            id: id.map(str::to_owned),
        }
    }

    #[test]
    fn create_answers_ok_or_a_conflict_with_the_issue_shape() {
        let mut b = book();
        let r = reservation_command(&mut b, &create(6, 1, 3, Some("r-1")), t(0)).unwrap();
        let d = doc(&r);
        assert_eq!(d["result"], "ok");
        assert_eq!(d["reservationId"], "r-1");
        assert_eq!(d["version"], 1);
        let err = reservation_command(&mut b, &create(4, 2, 4, None), t(0)).unwrap_err();
        assert_eq!(err.exit_code(), 4);
        let CliError::Promise(LedgerError::DoesNotFit { offer, .. }) = &err else {
            panic!("{err}")
        };
        let message = err.to_string();
        let c = serde_json::to_value(ConflictReport::new(&message, offer)).unwrap();
        assert_eq!(c["version"], 1);
        assert_eq!(c["result"], "conflict");
        assert_eq!(c["offer"]["max"]["cores"], 2);
        assert_eq!(c["offer"]["earliestStart"], json!(t(3)));
        assert_eq!(c["offer"]["earliestEnd"], json!(t(5)));
        assert!(c["message"].as_str().unwrap().contains("AZ-1"));
        assert!(human_offer(offer).contains("largest amount over the window: 2 cores"));
    }

    #[test]
    fn update_replaces_only_the_lines_given() {
        let mut b = book();
        reservation_command(&mut b, &create(4, 1, 3, Some("r-1")), t(0)).unwrap();
        let upd = ReservationCommand::Update {
            id: "r-1".into(),
            zone: None,
            amounts: AmountArgs {
                cores: Some(5),
                ..Default::default()
            },
            start: None,
            end: None,
            expiry: None,
            elements: vec!["net-1".into()],
        };
        let r = reservation_command(&mut b, &upd, t(0)).unwrap();
        let cap = &doc(&r)["reservation"]["capacity"];
        assert_eq!(cap["cores"], 5);
        assert_eq!(cap["ram"], 1024);
        assert_eq!(doc(&r)["reservation"]["elements"], json!(["net-1"]));
    }

    #[test]
    fn allocations_draw_and_give_back() {
        let mut b = book();
        reservation_command(&mut b, &create(4, 1, 3, Some("r-1")), t(0)).unwrap();
        let draw = |cores| AllocationCommand::Create {
            reservation: Some("r-1".into()),
            zone: None,
            amounts: amounts_of(cores, 512),
            instance_ref: None,
            id: None,
        };
        // Not started yet: a bad request (exit 2) naming the status.
        let err = allocation_command(&mut b, &draw(2), t(0)).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("initialized"), "{err}");
        b.ledger.advance_to(t(1)).unwrap();
        let r = allocation_command(&mut b, &draw(3), t(1)).unwrap();
        assert_eq!(doc(&r)["reservation"]["remaining"]["cores"], 1);
        let id = doc(&r)["allocationId"].as_str().unwrap().to_owned();
        let err = allocation_command(&mut b, &draw(2), t(1)).unwrap_err();
        assert_eq!(err.exit_code(), 4);
        let r = allocation_command(&mut b, &AllocationCommand::Destroy { id }, t(2)).unwrap();
        assert!(doc(&r)["allocation"]["end"].is_string(), "{:?}", doc(&r));
        let err = allocation_command(
            &mut b,
            &AllocationCommand::Destroy { id: "a-404".into() },
            t(2),
        )
        .unwrap_err();
        assert!(err.to_string().contains("a-404"), "{err}");
    }

    #[test]
    fn capacity_reports_the_worst_instant_of_the_window() {
        let mut b = book();
        reservation_command(&mut b, &create(5, 2, 3, None), t(0)).unwrap();
        let q = |zone: Option<&str>| CapacityCommand::Query {
            zone: zone.map(str::to_owned),
            start: Some(t(0)),
            end: Some(t(4)),
            utilization: false,
        };
        let r = capacity_command(&mut b, &q(Some("AZ-1")), t(0)).unwrap();
        assert_eq!(doc(&r)["available"]["cores"], 3);
        assert_eq!(doc(&r)["reserved"]["cores"], 5);
        assert_eq!(doc(&r)["used"]["cores"], 0);
        assert!(r.human.contains("cores"));
        let r = capacity_command(&mut b, &q(None), t(0)).unwrap();
        assert_eq!(doc(&r)["zones"][0]["zone"], "AZ-1");
        let fit = CapacityCommand::Fit {
            zone: None,
            amounts: amounts_of(1, 0),
            start: Some(t(2)),
            end: Some(t(3)),
        };
        let r = capacity_command(&mut b, &fit, t(0)).unwrap();
        assert_eq!(doc(&r)["fit"], json!([{"zone": "AZ-1", "count": 3}]));
    }

    #[test]
    fn amounts_names_non_zero_lines() {
        assert_eq!(
            amounts(&Capacity::compute(2, 512, 1)),
            "2 cores, 512 MiB ram, 1 instances"
        );
        assert_eq!(amounts(&Capacity::default()), "nothing");
        let a = AmountArgs {
            size: Some(3),
            ..Default::default()
        };
        assert_eq!(
            a.over(Capacity::compute(1, 2, 3)),
            Capacity::compute(1, 2, 3).with(ResourceLine::Size, 3)
        );
    }
}
