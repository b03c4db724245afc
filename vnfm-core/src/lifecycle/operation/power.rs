//! `OPERATE`: start or stop the instance's servers. The servers are shown, those not in the
//! wanted state yet (`ACTIVE` to start, `SHUTOFF` to stop) are started or stopped, then shown
//! every poll interval until each is in it, or the stack timeout.
//!
//! [`Power`] is a part of [`Operation`](super::Operation) with its own `handle_*` / `poll_*`:
//! the coordinator routes [`OpEvent::Servers`](super::OpEvent::Servers) and
//! [`OpEvent::PowerSet`](super::OpEvent::PowerSet) and its timer to it while an `OPERATE`
//! plan runs, and reads the end from [`Power::poll_end`].

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::actions::OpAction;
use super::helpers::{chrono_of, internal_error};
use crate::driver::{DriverError, ServerInfo};
use crate::id::ServerId;
use crate::lifecycle::failure::{Failed, FailureKind};

/// What the part waits for.
#[derive(Debug)]
enum Phase {
    /// The servers are shown, before anything is sent.
    Check,
    /// These servers are being started or stopped.
    Sent(Vec<ServerId>),
    /// These servers are not in the wanted state yet; they are shown again until `deadline`.
    Wait {
        deadline: DateTime<Utc>,
        servers: Vec<ServerId>,
    },
}

/// Start (`on`) or stop a list of servers, and wait until they are.
#[derive(Debug)]
pub(super) struct Power {
    on: bool,
    /// How long the servers have to reach the state once asked (the stack timeout).
    timeout: Duration,
    poll_interval: Duration,
    phase: Phase,
    next: Option<OpAction>,
    wake: Option<DateTime<Utc>>,
    end: Option<Result<(), Failed>>,
}

impl Power {
    /// Starts (`on`) or stops `servers`; the first action shows them.
    pub(super) fn new(
        on: bool,
        servers: Vec<ServerId>,
        timeout: Duration,
        poll_interval: Duration,
    ) -> Self {
        Self {
            on,
            timeout,
            poll_interval,
            phase: Phase::Check,
            next: Some(OpAction::ShowServers(servers)),
            wake: None,
            end: None,
        }
    }

    /// The status a server has once it is done.
    fn want(&self) -> &'static str {
        if self.on {
            "ACTIVE"
        } else {
            "SHUTOFF"
        }
    }

    /// The next action ([`OpAction::ShowServers`], [`OpAction::SetPower`]).
    pub(super) fn poll_action(&mut self) -> Option<OpAction> {
        self.next.take()
    }

    /// When to call [`Power::handle_timeout`], while it waits for the servers.
    pub(super) fn poll_timeout(&self) -> Option<DateTime<Utc>> {
        self.wake
    }

    /// Every server in the wanted state, or why not, once it is over.
    pub(super) fn poll_end(&mut self) -> Option<Result<(), Failed>> {
        self.end.take()
    }

    /// The servers shown: those in the wanted state are done; the others are started or
    /// stopped (the first time) or awaited. A server in `ERROR`, or that cannot be shown, ends
    /// it.
    pub(super) fn handle_servers(
        &mut self,
        r: BTreeMap<ServerId, Result<ServerInfo, DriverError>>,
        now: DateTime<Utc>,
    ) {
        let todo = match self.todo(r) {
            Ok(t) => t,
            Err(f) => return self.end = Some(Err(f)),
        };
        if todo.is_empty() {
            self.end = Some(Ok(()));
            return;
        }
        match &self.phase {
            Phase::Check => {
                self.next = Some(OpAction::SetPower {
                    servers: todo.clone(),
                    on: self.on,
                });
                self.phase = Phase::Sent(todo);
            }
            Phase::Wait { deadline, .. } if now >= *deadline => {
                let servers: Vec<&str> = todo.iter().map(ServerId::as_str).collect();
                self.end = Some(Err(Failed::new(
                    FailureKind::Backend,
                    "VIM request timed out",
                    format!(
                        "server(s) {} not {} within {} s",
                        servers.join(", "),
                        self.want(),
                        self.timeout.as_secs()
                    ),
                )));
            }
            Phase::Wait { deadline, .. } => {
                let deadline = *deadline;
                self.phase = Phase::Wait {
                    deadline,
                    servers: todo,
                };
                self.wait(now, deadline);
            }
            Phase::Sent(_) => self.out_of_turn("servers shown while a start or stop is out"),
        }
    }

    /// The start or stop of each server answered: the servers are awaited.
    pub(super) fn handle_power_set(&mut self, r: Vec<Result<(), DriverError>>, now: DateTime<Utc>) {
        let Phase::Sent(servers) = std::mem::replace(&mut self.phase, Phase::Check) else {
            return self.out_of_turn("a start or stop answered that was not asked");
        };
        if let Some(e) = r.into_iter().find_map(Result::err) {
            self.end = Some(Err(Failed::driver(&e)));
            return;
        }
        let deadline = now + chrono_of(self.timeout);
        self.phase = Phase::Wait { deadline, servers };
        self.wait(now, deadline);
    }

    /// Time passed: the servers awaited are shown again once the poll interval is over.
    pub(super) fn handle_timeout(&mut self, now: DateTime<Utc>) {
        if self.wake.is_none_or(|t| t > now) {
            return;
        }
        self.wake = None;
        if let Phase::Wait { servers, .. } = &self.phase {
            self.next = Some(OpAction::ShowServers(servers.clone()));
        }
    }

    fn wait(&mut self, now: DateTime<Utc>, deadline: DateTime<Utc>) {
        self.wake = Some((now + chrono_of(self.poll_interval)).min(deadline));
    }

    /// The servers not in the wanted state yet.
    fn todo(
        &self,
        r: BTreeMap<ServerId, Result<ServerInfo, DriverError>>,
    ) -> Result<Vec<ServerId>, Failed> {
        let want = self.want();
        let mut todo = Vec::new();
        for (id, info) in r {
            match info {
                Ok(s) if s.status == want => {}
                Ok(s) if s.status == "ERROR" => {
                    return Err(Failed::new(
                        FailureKind::StackFailed,
                        "server in ERROR",
                        format!("server {id} is in ERROR: it cannot be started or stopped"),
                    ));
                }
                Ok(_) => todo.push(id),
                Err(e) => return Err(Failed::driver(&e)),
            }
        }
        Ok(todo)
    }

    fn out_of_turn(&mut self, what: &str) {
        self.end = Some(Err(internal_error(what)));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use chrono::TimeZone;

    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(60);
    const POLL: Duration = Duration::from_secs(5);

    fn t(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + s, 0).unwrap()
    }

    fn ids(names: &[&str]) -> Vec<ServerId> {
        names.iter().map(|n| ServerId::from(*n)).collect()
    }

    fn server(id: &str, status: &str) -> ServerInfo {
        ServerInfo {
            id: ServerId::from(id),
            name: id.to_owned(),
            status: status.to_owned(),
            host: None,
            host_id: None,
            addresses: Vec::new(),
            zone: None,
            flavor: None,
            server_groups: Vec::new(),
            fault: None,
        }
    }

    fn shown(states: &[(&str, &str)]) -> BTreeMap<ServerId, Result<ServerInfo, DriverError>> {
        states
            .iter()
            .map(|(id, s)| (ServerId::from(*id), Ok(server(id, s))))
            .collect()
    }

    fn failure(p: &mut Power) -> Failed {
        match p.poll_end() {
            Some(Err(f)) => f,
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[test]
    fn starts_the_servers_not_active_and_waits_until_they_are() {
        let mut p = Power::new(true, ids(&["s1", "s2"]), TIMEOUT, POLL);
        assert_eq!(
            p.poll_action(),
            Some(OpAction::ShowServers(ids(&["s1", "s2"])))
        );
        assert_eq!(p.poll_action(), None);
        p.handle_servers(shown(&[("s1", "ACTIVE"), ("s2", "SHUTOFF")]), t(0));
        assert_eq!(
            p.poll_action(),
            Some(OpAction::SetPower {
                servers: ids(&["s2"]),
                on: true
            }),
            "only the server not ACTIVE yet"
        );
        p.handle_power_set(vec![Ok(())], t(1));
        assert_eq!(p.poll_action(), None);
        assert_eq!(
            p.poll_timeout(),
            Some(t(6)),
            "shown again after the poll interval"
        );
        p.handle_timeout(t(5));
        assert_eq!(p.poll_action(), None, "too early");
        p.handle_timeout(t(6));
        assert_eq!(p.poll_action(), Some(OpAction::ShowServers(ids(&["s2"]))));
        p.handle_servers(shown(&[("s2", "BUILD")]), t(6));
        assert!(p.poll_end().is_none());
        assert_eq!(p.poll_timeout(), Some(t(11)));
        p.handle_timeout(t(11));
        assert_eq!(p.poll_action(), Some(OpAction::ShowServers(ids(&["s2"]))));
        p.handle_servers(shown(&[("s2", "ACTIVE")]), t(11));
        assert!(matches!(p.poll_end(), Some(Ok(()))));
    }

    #[test]
    fn servers_already_stopped_end_it_without_a_request() {
        let mut p = Power::new(false, ids(&["s1"]), TIMEOUT, POLL);
        p.poll_action().unwrap();
        p.handle_servers(shown(&[("s1", "SHUTOFF")]), t(0));
        assert!(matches!(p.poll_end(), Some(Ok(()))));
        assert_eq!(p.poll_action(), None, "no stop sent");
    }

    #[test]
    fn a_server_in_error_or_not_shown_ends_it() {
        let mut p = Power::new(true, ids(&["s1"]), TIMEOUT, POLL);
        p.poll_action().unwrap();
        p.handle_servers(shown(&[("s1", "ERROR")]), t(0));
        let f = failure(&mut p);
        assert_eq!(f.kind, FailureKind::StackFailed);
        assert!(f.detail.contains("server s1 is in ERROR"), "{}", f.detail);

        let mut p = Power::new(true, ids(&["s1"]), TIMEOUT, POLL);
        p.poll_action().unwrap();
        let gone = DriverError::NotFound {
            driver: "nova",
            what: "server s1".into(),
        };
        p.handle_servers(BTreeMap::from([(ServerId::from("s1"), Err(gone))]), t(0));
        assert_eq!(failure(&mut p).kind, FailureKind::StackFailed);
    }

    #[test]
    fn a_refused_stop_ends_it() {
        let mut p = Power::new(false, ids(&["s1"]), TIMEOUT, POLL);
        p.poll_action().unwrap();
        p.handle_servers(shown(&[("s1", "ACTIVE")]), t(0));
        p.poll_action().unwrap();
        let e = DriverError::Unavailable {
            driver: "nova",
            message: "down".into(),
        };
        p.handle_power_set(vec![Err(e)], t(1));
        let f = failure(&mut p);
        assert_eq!(f.kind, FailureKind::Backend);
        assert!(f.detail.contains("nova: unavailable: down"), "{}", f.detail);
        assert_eq!(p.poll_timeout(), None);
    }

    #[test]
    fn servers_not_there_at_the_timeout_are_named() {
        let mut p = Power::new(false, ids(&["s1", "s2"]), TIMEOUT, POLL);
        p.poll_action().unwrap();
        p.handle_servers(shown(&[("s1", "ACTIVE"), ("s2", "ACTIVE")]), t(0));
        p.poll_action().unwrap();
        p.handle_power_set(vec![Ok(()), Ok(())], t(0));
        // The last poll before the deadline is capped at it.
        p.handle_servers(shown(&[("s1", "ACTIVE"), ("s2", "SHUTOFF")]), t(58));
        assert_eq!(p.poll_timeout(), Some(t(60)));
        p.handle_timeout(t(60));
        assert_eq!(p.poll_action(), Some(OpAction::ShowServers(ids(&["s1"]))));
        p.handle_servers(shown(&[("s1", "ACTIVE")]), t(60));
        let f = failure(&mut p);
        assert_eq!(f.kind, FailureKind::Backend);
        assert_eq!(f.detail, "server(s) s1 not SHUTOFF within 60 s");
    }
}
