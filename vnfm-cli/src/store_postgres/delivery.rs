//! What several `vnfm serve` replicas share to deliver the SOL003 notifications of one outbox
//! (docs/replicas.md, "Notifications and the ledger across replicas"):
//!
//! - **Names.** The outbox entries are numbered from one sequence of the database
//!   ([`PgStore::outbox_sequences`]), so two replicas never give two entries the same name,
//!   and a subscription's entries sort in the order their numbers were drawn (each drawn under
//!   the replica's commit gate, just before the commit).
//! - **Claims.** One replica at a time delivers a subscription's outbox: the one that holds
//!   the subscription's row in `lcm_delivery_claims` ([`PgStore::claim_delivery`]), until the
//!   time the row says (the database's clock, so the replicas' clocks do not matter). The
//!   holder renews it while it delivers; a replica that dies leaves it to expire, and the
//!   next replica that claims it after that delivers what is left (a notification the dead
//!   one had sent but not yet deleted comes again, with the same `id`).

use std::time::Duration;

use vnfm_core::driver::DriverError;

use super::{PgStore, DRIVER};

impl PgStore {
    /// `n` numbers of the outbox's sequence (`lcm_outbox_seq`), ascending: no other call, by
    /// any process on the database, gets any of them.
    ///
    /// # Errors
    /// As [`PgStore::document`].
    pub async fn outbox_sequences(&self, n: usize) -> Result<Vec<u64>, DriverError> {
        let doing = format!("numbering {n} outbox entries");
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        let rows = self
            .rows(
                &doing,
                "SELECT nextval('lcm_outbox_seq') FROM generate_series(1, $1::BIGINT)",
                &[&n],
            )
            .await?;
        let mut out = rows
            .iter()
            .map(|r| {
                let v: i64 = r.try_get(0).map_err(|e| self.pg_error(&doing, e))?;
                u64::try_from(v).map_err(|_| DriverError::Other {
                    driver: DRIVER,
                    message: format!("{}: {doing}: sequence value {v} below 0", self.target),
                    source: None,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        out.sort_unstable();
        Ok(out)
    }

    /// Claims (or renews) the delivery of subscription `subscription`'s outbox for `holder`,
    /// for `ttl` from now on the database's clock: `true` when `holder` has it now (no one
    /// had it, its claim expired, or `holder` had it already), `false` when another holder's
    /// claim is still running. One statement: two replicas never both get it.
    ///
    /// # Errors
    /// As [`PgStore::document`].
    pub async fn claim_delivery(
        &self,
        subscription: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<bool, DriverError> {
        let doing = format!("claiming the delivery of subscription {subscription}");
        let ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        let rows = self
            .rows(
                &doing,
                "INSERT INTO lcm_delivery_claims (subscription, holder, until)
                 VALUES ($1, $2, clock_timestamp() + $3::BIGINT * interval '1 millisecond')
                 ON CONFLICT (subscription) DO UPDATE
                     SET holder = excluded.holder, until = excluded.until
                     WHERE lcm_delivery_claims.holder = excluded.holder
                        OR lcm_delivery_claims.until < clock_timestamp()
                 RETURNING holder",
                &[&subscription, &holder, &ms],
            )
            .await?;
        Ok(!rows.is_empty())
    }

    /// Gives up `holder`'s claim on subscription `subscription` (any holder's with `None`: the
    /// subscription is deleted), so that another replica may take it at once.
    ///
    /// # Errors
    /// As [`PgStore::document`].
    pub async fn release_delivery(
        &self,
        subscription: &str,
        holder: Option<&str>,
    ) -> Result<(), DriverError> {
        let doing = format!("releasing the delivery of subscription {subscription}");
        self.rows(
            &doing,
            "DELETE FROM lcm_delivery_claims
             WHERE subscription = $1 AND ($2::TEXT IS NULL OR holder = $2)",
            &[&subscription, &holder],
        )
        .await
        .map(drop)
    }
}

impl PgStore {
    /// Deletes the claims that expired (whoever held them): a claim row left by a replica
    /// that died, or renewed for a subscription just deleted, does not stay; a claim that is
    /// still wanted is taken again by its next claim.
    ///
    /// # Errors
    /// As [`PgStore::document`].
    pub async fn drop_expired_claims(&self) -> Result<(), DriverError> {
        self.rows(
            "dropping expired delivery claims",
            "DELETE FROM lcm_delivery_claims WHERE until < clock_timestamp()",
            &[],
        )
        .await
        .map(drop)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::super::tests::TestDb;
    use super::*;

    #[tokio::test]
    async fn outbox_numbers_are_never_given_twice_across_stores() {
        let Some(db) = TestDb::create("outbox_seq").await else {
            return;
        };
        let a = db.store().await;
        let b = db.store().await;
        let (x, y) = tokio::join!(a.outbox_sequences(50), b.outbox_sequences(50));
        let (x, y) = (x.unwrap(), y.unwrap());
        assert_eq!((x.len(), y.len()), (50, 50));
        assert!(x.windows(2).all(|w| w[0] < w[1]), "{x:?}");
        let mut all: Vec<u64> = x.into_iter().chain(y).collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 100);
        // Later draws are above every earlier one.
        let later = a.outbox_sequences(1).await.unwrap();
        assert!(later[0] > *all.last().unwrap());
    }

    #[tokio::test]
    async fn a_delivery_claim_has_one_holder_until_it_expires_or_is_released() {
        let Some(db) = TestDb::create("delivery_claim").await else {
            return;
        };
        let a = db.store().await;
        let b = db.store().await;
        let long = Duration::from_secs(3600);
        assert!(a.claim_delivery("lccn-1", "a", long).await.unwrap());
        assert!(!b.claim_delivery("lccn-1", "b", long).await.unwrap());
        // The holder renews it; another subscription is free.
        assert!(a.claim_delivery("lccn-1", "a", long).await.unwrap());
        assert!(b.claim_delivery("lccn-2", "b", long).await.unwrap());
        // Expired (as when its holder died): the next claimant gets it.
        let admin = db.store().await;
        admin
            .rows(
                "expiring",
                "UPDATE lcm_delivery_claims SET until = clock_timestamp() - interval '1 second'
                 WHERE subscription = 'lccn-1'",
                &[],
            )
            .await
            .unwrap();
        assert!(b.claim_delivery("lccn-1", "b", long).await.unwrap());
        assert!(!a.claim_delivery("lccn-1", "a", long).await.unwrap());
        // Released by its holder (a stop): free at once; another's release does nothing.
        a.release_delivery("lccn-1", Some("a")).await.unwrap();
        assert!(!a.claim_delivery("lccn-1", "a", long).await.unwrap());
        b.release_delivery("lccn-1", Some("b")).await.unwrap();
        assert!(a.claim_delivery("lccn-1", "a", long).await.unwrap());
        // A deleted subscription's claim goes whoever holds it.
        b.release_delivery("lccn-1", None).await.unwrap();
        assert!(b.claim_delivery("lccn-1", "b", long).await.unwrap());
        // Expired rows are dropped; running ones stay.
        assert!(a
            .claim_delivery("lccn-3", "a", Duration::from_millis(1))
            .await
            .unwrap());
        let count = || async {
            let rows = admin
                .rows("counting", "SELECT count(*) FROM lcm_delivery_claims", &[])
                .await
                .unwrap();
            rows[0].get::<_, i64>(0)
        };
        assert_eq!(count().await, 3);
        tokio::time::sleep(Duration::from_millis(20)).await;
        a.drop_expired_claims().await.unwrap();
        assert_eq!(count().await, 2);
    }

    #[tokio::test]
    async fn concurrent_claims_have_one_winner() {
        let Some(db) = TestDb::create("delivery_claim_race").await else {
            return;
        };
        let long = Duration::from_secs(3600);
        for round in 0..20 {
            let sub = format!("lccn-{round}");
            let mut tasks = Vec::new();
            for h in 0..3 {
                let s = db.store().await;
                let sub = sub.clone();
                tasks.push(tokio::spawn(async move {
                    s.claim_delivery(&sub, &format!("h{h}"), long)
                        .await
                        .unwrap()
                }));
            }
            let mut won = 0;
            for t in tasks {
                won += usize::from(t.await.unwrap());
            }
            assert_eq!(won, 1, "round {round}");
        }
    }
}
