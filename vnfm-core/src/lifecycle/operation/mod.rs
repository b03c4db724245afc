//! [`Operation`]: one LCM operation as a sans-IO state machine, in the shape of quinn-proto's
//! `Connection`.
//!
//! The machine never performs IO and never reads a clock. The caller feeds it events and the
//! time ([`Operation::handle_event`], [`Operation::handle_timeout`]), carries out the actions
//! it hands out ([`Operation::poll_action`]: commit to the store, create / update / show /
//! delete a stack, list its resources, mark servers unhealthy, show servers, list zones, run a
//! hook), sleeps until [`Operation::poll_timeout`] when it has nothing to do, and stops when
//! [`Operation::poll_end`] gives the result. [`crate::lifecycle::Lifecycle`] is that loop over the
//! driver traits; a program with its own IO drives the machine the same way.
//!
//! # Contract
//! - At most one action is out at a time: after [`Operation::poll_action`] returns one, the
//!   next call returns `None` until the action's event was handled. Each action has exactly
//!   one event ([`OpAction`] says which).
//! - Time only moves through `now` arguments. The stack timeout, the poll interval, the wait
//!   for a failed stack's resources to settle and the lease renewals are timers: when
//!   [`Operation::poll_timeout`] returns `t`, call [`Operation::handle_timeout`] at `t` (or
//!   later).
//! - Every commit carries preconditions on the versions the machine read or wrote
//!   ([`crate::driver::Precondition`]): the start takes the instance (its version must not
//!   have moved since it was read) and every later commit checks that the occurrence is still
//!   the machine's. A commit refused with [`DriverError::Conflict`] means another process took
//!   the operation over (its lease had expired): the machine stops at once and writes nothing
//!   more.
//! - Each commit of the occurrence renews its [`Lease`] (`now` + the lease time) and saves the
//!   [`Progress`], so an interrupted operation can be retried, rolled back or failed from
//!   where it stopped. While the machine waits, a renewal commit goes out every third of the
//!   lease time.
//!
//! # Plans
//! Instantiate, scale-out, scale-in, heal, terminate, change flavour, change external
//! connectivity and the rollbacks are
//! [`Plan`]s of the same machine. The placed plans (instantiate, scale-out, heal, change
//! flavour: the new flavour's template) list the zones, grant (or take
//! the zones pinned, or the healed VNFCs' own), and hand the stack to the nested
//! [`Reselection`] machine; the others update the stack to the VNFCs that stay (a change of
//! external connectivity: all of them, with its links in `nfv.CP`), or delete it.
//! Then the servers are read back, the hooks of the plan's point run, and the occurrence ends
//! in one commit with the instance. The `Cnf*` plans (see [`crate::lifecycle::cnf`]) do the same over a
//! Kubernetes cluster: list the nodes (preflight), apply the manifests, scale the workloads,
//! delete pods or objects, and poll the pods instead of the stack.
//!
//! # Layout
//! [`Operation`] is a coordinator (in `machine`): it owns the occurrence and routes each event
//! to the part whose step is current.
//! - `power`: the part that starts or stops servers (`OPERATE`) and waits until they are.
//! - `progress`: [`Plan`] and [`Progress`], the saved state (JSON in the occurrence).
//! - `actions`: [`OpAction`], [`OpEvent`], [`OperationStart`].
//! - `hooks`: the part that runs the hooks of a plan's point, one at a time.
//! - `machine`: the coordinator, its public API, the start and end commits.
//! - `nfvo_grant`: the part that asks an NFVO for the grant (request, `202` polls, timeout).
//! - `plans`: how each plan starts (resume wait, `MODIFY_INFO`, `OPERATE`, a CNF plan's run).
//! - `stack_run`: the placed plans' stack run around the nested [`Reselection`](crate::reselect::Reselection)
//!   machine (zones, local grant, settle, failed servers and hosts located), and the restore
//!   of the VNFCs that stay.
//! - `stack_apply`: the part that applies one stack (create or update) and shows it every
//!   poll interval until it is complete, failed or rolled back, or the stack timeout; the
//!   stack run creates one for every apply and feeds its end to the reselection machine.
//! - `collect`: the servers read back, the instance after, the hooks.
//! - `delete`: the stack deleted.
//! - `cnf_run`: the part that runs a CNF plan over a Kubernetes cluster (the nodes' preflight,
//!   the apply, the scale, pod or object deletions, the pods awaited), and the CNF instance
//!   after.
//! - `timers`: the named timers (the step's wait, the lease renewal) in one table.
//! - `units`: the reselection units of a placed plan.
//!
//! [`DriverError::Conflict`]: crate::driver::DriverError::Conflict
//! [`Lease`]: crate::lcm::Lease
//! [`Reselection`]: crate::reselect::Reselection

mod actions;
mod backoff;
mod cnf_run;
mod collect;
mod delete;
mod helpers;
mod hooks;
mod machine;
mod nfvo_grant;
mod plans;
mod power;
mod progress;
mod retry;
mod stack_apply;
mod stack_run;
mod timers;
mod units;

pub use actions::{OpAction, OpEvent, OperationStart};
pub use machine::Operation;
pub use progress::{Plan, Progress};
