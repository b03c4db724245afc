//! End-of-operation hooks and interrupts.
//!
//! A hook runs at a point of an operation ([`HookPoint`]) as an action of the
//! [`super::Operation`] machine: after the stack reached its new state and the servers were
//! read back (`*_end`), or before the stack is deleted (`terminate_start`). Its outcome is
//! kept in the occurrence (`hooks`); a failing hook ends the operation `FAILED_TEMP` with
//! failure kind `HOOK`, and `retry` runs it again (without touching the stack). Labelling
//! Kubernetes worker nodes with their compute host is such a hook.

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::id::OpOccId;
use crate::lcm::VnfInstance;

/// Where in an operation a hook runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookPoint {
    /// After an instantiate's servers are read back.
    InstantiateEnd,
    /// After a scale's servers are read back.
    ScaleEnd,
    /// After a heal's servers are read back.
    HealEnd,
    /// Before a terminate deletes the stack.
    TerminateStart,
}

impl HookPoint {
    /// The name kept in the occurrence (`instantiate_end`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InstantiateEnd => "instantiate_end",
            Self::ScaleEnd => "scale_end",
            Self::HealEnd => "heal_end",
            Self::TerminateStart => "terminate_start",
        }
    }
}

/// What a hook is asked to do.
#[derive(Clone, Debug, PartialEq)]
pub struct HookCall {
    /// The hook's name.
    pub name: String,
    /// Where it runs.
    pub point: HookPoint,
    /// The operation occurrence.
    pub op_occ_id: OpOccId,
    /// The instance as the operation leaves it (`*_end`) or as it is (`terminate_start`).
    pub instance: VnfInstance,
}

/// An end-of-operation hook (see the [module docs](self)).
#[async_trait]
pub trait OperationHook: Send + Sync + Debug + 'static {
    /// Its name, as kept in the occurrence.
    fn name(&self) -> &str;
    /// Where it runs.
    fn points(&self) -> &[HookPoint];
    /// Runs it: `Ok` with what it did, or `Err` with why it failed.
    async fn run(&self, call: &HookCall) -> Result<String, String>;
}

/// A hook as the machine knows it: its name and points.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookSpec {
    /// The name.
    pub name: String,
    /// Where it runs.
    pub points: Vec<HookPoint>,
}

/// Tasks waiting on one [`Interrupt`] at most (older ones are dropped, and then notice the
/// interrupt at their next step instead of at once).
const MAX_WAITERS: usize = 64;

/// Asks a running operation to stop: it ends `FAILED_TEMP` ("interrupted") once its current
/// step returns, and can then be retried, rolled back or failed. Clones share the request; a
/// CLI triggers it from its SIGINT/SIGTERM handler.
#[derive(Clone, Debug, Default)]
pub struct Interrupt {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    flag: AtomicBool,
    reason: Mutex<String>,
    wakers: Mutex<Vec<Waker>>,
}

impl Interrupt {
    /// A handle nobody triggered yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the operation to stop, saying why (e.g. "SIGINT").
    pub fn trigger(&self, reason: &str) {
        *self
            .inner
            .reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = reason.to_owned();
        self.inner.flag.store(true, Ordering::SeqCst);
        let wakers = std::mem::take(
            &mut *self
                .inner
                .wakers
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for w in wakers {
            w.wake();
        }
    }

    /// Why it was triggered, once it was.
    pub fn reason(&self) -> Option<String> {
        self.inner.flag.load(Ordering::SeqCst).then(|| {
            self.inner
                .reason
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        })
    }

    /// Waits until `fut` completes (`Some`) or the interrupt is triggered (`None`).
    pub(crate) async fn race<F: Future<Output = ()>>(&self, fut: F) -> Option<()> {
        let mut fut = std::pin::pin!(fut);
        std::future::poll_fn(|cx: &mut Context<'_>| {
            if self.inner.flag.load(Ordering::SeqCst) {
                return Poll::Ready(None);
            }
            if Pin::as_mut(&mut fut).poll(cx).is_ready() {
                return Poll::Ready(Some(()));
            }
            {
                // One waker per waiting task: bounded however often it is polled.
                let mut ws = self
                    .inner
                    .wakers
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                if !ws.iter().any(|w| w.will_wake(cx.waker())) {
                    if ws.len() >= MAX_WAITERS {
                        ws.remove(0);
                    }
                    ws.push(cx.waker().clone());
                }
            }
            if self.inner.flag.load(Ordering::SeqCst) {
                return Poll::Ready(None);
            }
            Poll::Pending
        })
        .await
    }
}
