//! `vnfm promise`: the OPNFV Promise reservation ledger of the state file.
//!
//! Each command loads the ledger from the state file (or starts one from the simulated
//! cloud's zones, see [`crate::promise`]), advances it to `--now` (default: the clock), runs
//! one ledger operation, saves the ledger and prints the result with the events it caused
//! (reservations that started, expired, were preempted, ...). A reservation that does not fit
//! is answered with Promise's counter-offer on stdout and exit status 4.

use std::fmt::Write as _;

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use vnfm_core::driver::{ListZones, ZoneCatalog};
use vnfm_core::id::ZoneId;
use vnfm_core::reservation::{
    Allocation, Capacity, CapacityReport, CounterOffer, Event, LedgerError, Pool, PoolRequest,
    Priority, Reservation, ReservationId, ReservationQuery, ReservationRequest, ResourceLine,
    Window,
};

use super::lcm::{check_vim, open_sim, open_state, runtime};
use crate::cli::{AmountArgs, PriorityArg, PromiseArgs, PromiseCommand};
use crate::config::Config;
use crate::error::CliError;
use crate::output::Output;
use crate::promise::{self, PromiseBook};

impl AmountArgs {
    /// The amounts as a ledger [`Capacity`] (unset lines zero).
    pub fn capacity(&self) -> Capacity {
        Capacity {
            cores: self.cores.unwrap_or(0),
            ram: self.ram.unwrap_or(0),
            instances: self.instances.unwrap_or(0),
            addresses: self.addresses.unwrap_or(0),
            volumes: self.volumes.unwrap_or(0),
            size: self.size.unwrap_or(0),
            snapshots: self.snapshots.unwrap_or(0),
        }
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

/// What `vnfm promise --json` prints.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromiseReport {
    /// The time the command acted at.
    pub now: Option<DateTime<Utc>>,
    /// Capacity per zone (`capacity`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub capacity: Vec<CapacityReport>,
    /// The pool added or removed (`add-capacity`, `remove-capacity`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<Pool>,
    /// Reservations (`reserve`, `list`, `show`, `cancel`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reservations: Vec<Reservation>,
    /// The allocation (`draw`, `release`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocation: Option<Allocation>,
    /// What would fit instead of a reservation that does not (`reserve`, exit 4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counter_offer: Option<CounterOffer>,
    /// Every event the command caused, in time order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<Event>,
}

/// `vnfm promise ...`.
///
/// # Errors
/// [`CliError::Promise`] when the ledger refuses the request (exit 4 when capacity is short,
/// 2 for a bad request); [`CliError::State`] for an unusable state file; a usage error for a
/// VIM not wired into this build.
pub fn run(config: &Config, args: &PromiseArgs, out: Output) -> Result<(), CliError> {
    check_vim(config)?;
    let now = args.now.unwrap_or_else(Utc::now);
    runtime()?.block_on(async {
        let store = open_state(config)?;
        let mut book = match promise::load(&store, config).await? {
            Some(book) => book,
            None => {
                let sim = open_sim(&store, None, config).await?;
                let zones = sim.list_zones(ListZones::default()).await?;
                PromiseBook::from_catalogue(&zones, config.vim.seed, now)?
            }
        };
        let mut report = PromiseReport {
            now: Some(now),
            ..Default::default()
        };
        let result = execute(&mut book, &args.command, now, &mut report);
        // Transitions due by `now` happened even when the request was refused: keep them.
        promise::save(&store, &book, config).await?;
        if let Err(CliError::Promise(LedgerError::DoesNotFit { offer, .. })) = &result {
            report.counter_offer = Some((**offer).clone());
        }
        if result.is_ok() || report.counter_offer.is_some() {
            out.data(&human(&report), &report)?;
        }
        result
    })
}

/// Runs one command on the ledger, filling `report`.
///
/// # Errors
/// [`CliError::Promise`] with the ledger's refusal.
pub fn execute(
    book: &mut PromiseBook,
    command: &PromiseCommand,
    now: DateTime<Utc>,
    report: &mut PromiseReport,
) -> Result<(), CliError> {
    let advanced = book.ledger.advance_to(now)?;
    report.events.extend(advanced.events);
    let ids = &mut book.ids;
    let ledger = &mut book.ledger;
    match command {
        PromiseCommand::Capacity { zone, start, end } => {
            let start = start.unwrap_or(now);
            let window = Window::new(start, end.unwrap_or(start + Duration::hours(1)));
            report.capacity = match zone {
                Some(z) => vec![ledger.capacity(&ZoneId::new(z.as_str()), window)?],
                None => ledger.capacity_all(window)?,
            };
        }
        PromiseCommand::AddCapacity {
            zone,
            amounts,
            start,
            end,
        } => {
            let mut req = PoolRequest::new(zone.as_str(), amounts.capacity())
                .with_window(start.unwrap_or(now), *end);
            req.source = Some("declared".into());
            let o = ledger.increase_capacity(req, ids, now)?;
            report.pool = Some(o.value);
            report.events.extend(o.events);
        }
        PromiseCommand::RemoveCapacity {
            zone,
            amounts,
            start,
            end,
            force,
        } => {
            let req = PoolRequest::new(zone.as_str(), amounts.capacity())
                .with_window(start.unwrap_or(now), *end)
                .with_force(*force);
            let o = ledger.decrease_capacity(req, ids, now)?;
            report.pool = Some(o.value);
            report.events.extend(o.events);
        }
        PromiseCommand::Reserve {
            zone,
            amounts,
            start,
            end,
            expiry,
            priority,
            id,
        } => {
            let mut req = ReservationRequest::new(zone.as_str(), amounts.capacity())
                .with_priority((*priority).into());
            req.start = *start;
            req.end = *end;
            req.expiry = *expiry;
            req.id = id.as_deref().map(ReservationId::new);
            let o = ledger.create_reservation(req, ids, now)?;
            report.reservations.push(o.value);
            report.events.extend(o.events);
        }
        PromiseCommand::List { zone } => {
            let q = ReservationQuery {
                zone: zone.as_deref().map(ZoneId::new),
                ..Default::default()
            };
            report.reservations = ledger.query_reservations(&q)?.reservations;
        }
        PromiseCommand::Show { id } => {
            report.reservations.push(reservation(ledger, id)?);
        }
        PromiseCommand::Cancel { id } => {
            let o = ledger.cancel_reservation(&ReservationId::new(id.as_str()), now)?;
            report.reservations.push(o.value);
            report.events.extend(o.events);
        }
        PromiseCommand::Draw { id, amounts } => {
            let rid = ReservationId::new(id.as_str());
            let o = ledger.draw(&rid, amounts.capacity(), ids, now)?;
            report.allocation = Some(o.value);
            report.events.extend(o.events);
            report.reservations.push(reservation(ledger, id)?);
        }
        PromiseCommand::Release { id } => {
            let o = ledger
                .destroy_instance(&vnfm_core::reservation::AllocationId::new(id.as_str()), now)?;
            report.events.extend(o.events);
            if let Some(r) = &o.value.reservation {
                report.reservations.push(reservation(ledger, r.as_str())?);
            }
            report.allocation = Some(o.value);
        }
    }
    Ok(())
}

/// Draws the new VNFCs of `grant` granted into the zone of reservation `id` from it (see
/// [`vnfm_core::lifecycle::granter::draw_reservation`]), in the ledger of the state file, and
/// saves the ledger.
///
/// # Errors
/// [`CliError::Promise`] when the reservation cannot give them (exit 4 when it has not enough
/// left, 2 otherwise); [`CliError::State`] for an unusable state file.
pub async fn draw_grant(
    config: &Config,
    grant: &mut vnfm_core::grant::Grant,
    request: &vnfm_core::grant::GrantRequest,
    flavour: &vnfm_core::package::Flavour,
    id: &str,
    now: Option<DateTime<Utc>>,
) -> Result<Vec<Allocation>, CliError> {
    let now = now.unwrap_or_else(Utc::now);
    let store = open_state(config)?;
    let Some(mut book) = promise::load(&store, config).await? else {
        return Err(CliError::Promise(LedgerError::Rejected(
            vnfm_core::reservation::Rejection::UnknownReservation(ReservationId::new(id)),
        )));
    };
    let drawn = vnfm_core::lifecycle::granter::draw_reservation(
        grant,
        request,
        flavour,
        &ReservationId::new(id),
        &mut book.ledger,
        &mut book.ids,
        now,
    );
    promise::save(&store, &book, config).await?;
    Ok(drawn?)
}

fn reservation(ledger: &vnfm_core::reservation::Ledger, id: &str) -> Result<Reservation, CliError> {
    ledger.reservation(&ReservationId::new(id)).ok_or_else(|| {
        CliError::Promise(LedgerError::Rejected(
            vnfm_core::reservation::Rejection::UnknownReservation(ReservationId::new(id)),
        ))
    })
}

/// `4 cores, 4096 MiB ram, 1 instances`: the non-zero lines (`nothing` when all are zero).
pub fn amounts(c: &Capacity) -> String {
    let parts: Vec<String> = c
        .lines()
        .filter(|(_, a)| *a > 0)
        .map(|(l, a)| match l {
            ResourceLine::Ram => format!("{a} MiB ram"),
            ResourceLine::Size => format!("{a} GiB size"),
            l => format!("{a} {l}"),
        })
        .collect();
    if parts.is_empty() {
        "nothing".into()
    } else {
        parts.join(", ")
    }
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

/// The human form of a report.
pub fn human(r: &PromiseReport) -> String {
    let mut s = String::new();
    for c in &r.capacity {
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
    if let Some(p) = &r.pool {
        let _ = writeln!(
            s,
            "pool {} in zone {}: {} {} over {}",
            p.id,
            p.zone,
            if p.decrease { "minus" } else { "plus" },
            amounts(&p.capacity),
            window(&p.start, p.end.as_ref())
        );
    }
    if let Some(a) = &r.allocation {
        let _ = writeln!(
            s,
            "allocation {} in zone {}{}: {}{}",
            a.id,
            a.zone,
            a.reservation
                .as_ref()
                .map(|r| format!(" from reservation {r}"))
                .unwrap_or_default(),
            amounts(&a.capacity),
            a.end
                .as_ref()
                .map(|e| format!(", released at {}", time(e)))
                .unwrap_or_default()
        );
    }
    for res in &r.reservations {
        human_reservation(&mut s, res);
    }
    if r.reservations.is_empty()
        && r.capacity.is_empty()
        && r.pool.is_none()
        && r.allocation.is_none()
        && r.counter_offer.is_none()
    {
        s.push_str("no reservations\n");
    }
    if let Some(o) = &r.counter_offer {
        let _ = writeln!(s, "does not fit; counter-offer:");
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
    }
    if !r.events.is_empty() {
        s.push_str("events:\n");
        for e in &r.events {
            let _ = writeln!(s, "  {}", human_event(e));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use vnfm_core::zone::{ComputeHost, ComputeZone, Resources};

    fn t(h: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + h * 3600, 0).unwrap()
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

    fn reserve(cores: u64, start: i64, end: i64) -> PromiseCommand {
        PromiseCommand::Reserve {
            zone: "AZ-1".into(),
            amounts: amounts_of(cores, 1024),
            start: Some(t(start)),
            end: Some(t(end)),
            expiry: None,
            priority: PriorityArg::Normal,
            id: None,
        }
    }

    #[test]
    fn reserve_then_a_counter_offer_with_exit_4() {
        let mut b = book();
        let mut r = PromiseReport::default();
        execute(&mut b, &reserve(6, 1, 3), t(0), &mut r).unwrap();
        assert_eq!(r.reservations.len(), 1);
        let first_end = r.reservations[0].end;
        let mut r = PromiseReport::default();
        let err = execute(&mut b, &reserve(4, 2, 4), t(0), &mut r).unwrap_err();
        assert_eq!(err.exit_code(), 4);
        let CliError::Promise(LedgerError::DoesNotFit { offer, .. }) = err else {
            panic!("{err}")
        };
        assert_eq!(offer.largest.cores, 2);
        assert_eq!(offer.earliest.unwrap().start, first_end);
    }

    #[test]
    fn draw_release_and_their_refusals() {
        let mut b = book();
        let mut r = PromiseReport::default();
        execute(&mut b, &reserve(4, 1, 3), t(0), &mut r).unwrap();
        let id = r.reservations[0].id.to_string();
        let draw = |cores| PromiseCommand::Draw {
            id: id.clone(),
            amounts: amounts_of(cores, 512),
        };
        // Not started yet: a bad request (exit 2) naming the status.
        let err = execute(&mut b, &draw(2), t(0), &mut PromiseReport::default()).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("initialized"), "{err}");
        // Started: the reservation passes to active as the ledger advances to --now.
        let mut r = PromiseReport::default();
        execute(&mut b, &draw(3), t(1), &mut r).unwrap();
        assert_eq!(r.reservations[0].remaining.cores, 1);
        assert!(human(&r).contains("reservationStarted"), "{}", human(&r));
        let alloc = r.allocation.unwrap().id.to_string();
        // More than remains: capacity short (exit 4).
        let err = execute(&mut b, &draw(2), t(1), &mut PromiseReport::default()).unwrap_err();
        assert_eq!(err.exit_code(), 4);
        let mut r = PromiseReport::default();
        execute(&mut b, &PromiseCommand::Release { id: alloc }, t(2), &mut r).unwrap();
        assert_eq!(r.reservations[0].remaining.cores, 4);
        // Unknown reservation: exit 2.
        let err = execute(
            &mut b,
            &PromiseCommand::Show { id: "nope".into() },
            t(2),
            &mut PromiseReport::default(),
        )
        .unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("nope"), "{err}");
    }

    #[test]
    fn capacity_reports_the_worst_instant_of_the_window() {
        let mut b = book();
        execute(
            &mut b,
            &reserve(5, 2, 3),
            t(0),
            &mut PromiseReport::default(),
        )
        .unwrap();
        let mut r = PromiseReport::default();
        let cmd = PromiseCommand::Capacity {
            zone: Some("AZ-1".into()),
            start: Some(t(0)),
            end: Some(t(4)),
        };
        execute(&mut b, &cmd, t(0), &mut r).unwrap();
        assert_eq!(r.capacity[0].available.cores, 3);
        assert_eq!(r.capacity[0].reserved.cores, 5);
        assert!(human(&r).contains("cores"));
    }

    #[test]
    fn amounts_names_non_zero_lines() {
        assert_eq!(
            amounts(&Capacity::compute(2, 512, 1)),
            "2 cores, 512 MiB ram, 1 instances"
        );
        assert_eq!(amounts(&Capacity::default()), "nothing");
    }
}
