//! A document changed under a lock of the database: what several replicas share and change
//! with a decision that must run once (the Promise ledger: the core's
//! `ReservationBook::apply` runs its change once, on the ledger as it is now) is read with
//! its name locked (a transaction-level advisory lock, which also covers a document not
//! written yet) and its row locked (`SELECT … FOR UPDATE`), changed and written in one short
//! transaction.
//! Another writer of the row waits for it, and a compare-and-swap writer
//! ([`PgStore::write_document_if`]) that read it before finds its stamp moved: no change is
//! lost, whichever way the others write.

use vnfm_core::driver::DriverError;

use super::{PgStore, DRIVER};

impl PgStore {
    /// Runs `f` on document `name` with its row locked, and stores the body `f` returns, if
    /// any, in the same transaction; `f`'s value and the new stamp (`None` when nothing was
    /// written). `f` is given the document's stamp and body (`None` when absent), the body
    /// `None` when the stamp is `known` (the caller has that version: the body is not read).
    /// `f` runs once, while the transaction is open: it must not wait for anything.
    ///
    /// # Errors
    /// [`DriverError::Conflict`] when the document was absent and a writer that does not take
    /// the lock (a plain write) created it meanwhile (nothing written; run it again);
    /// otherwise as [`PgStore::document`], nothing written.
    pub async fn update_document_locked<R>(
        &self,
        name: &str,
        known: Option<i64>,
        f: impl FnOnce(Option<(i64, Option<&str>)>) -> (Option<String>, R),
    ) -> Result<(R, Option<i64>), DriverError> {
        self.update_document_locked_queueing(name, known, None, |cur| {
            let (body, out) = f(cur);
            (body, Vec::new(), out)
        })
        .await
        .map(|(out, stamp, _)| (out, stamp))
    }

    /// [`PgStore::update_document_locked`] that also queues, in the same transaction, the
    /// documents `f` returns beside the body (when a body is written): each named `prefix`
    /// and a number of the outbox's sequence (20 digits, ascending in `f`'s order; numbers
    /// drawn under the row lock, so in the order of the changes of `name`), while fewer than
    /// `max` documents have that prefix. Also returns how many were queued (the rest are not
    /// written: the queue is full).
    ///
    /// # Errors
    /// As [`PgStore::update_document_locked`].
    pub async fn update_document_locked_queueing<R>(
        &self,
        name: &str,
        known: Option<i64>,
        queue: Option<(&str, usize)>,
        f: impl FnOnce(Option<(i64, Option<&str>)>) -> (Option<String>, Vec<String>, R),
    ) -> Result<(R, Option<i64>, usize), DriverError> {
        let doing = format!("changing document {name}");
        let mut client = self.client(&doing).await?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| self.pg_error(&doing, e))?;
        // The lock of the name, also when there is no row yet to lock: two first writers
        // take turns (the second finds the first's row), released at the end of the
        // transaction (or with its connection). The key is that of every lock of a document's
        // name (`PgStore::with_locked_document` uses the same seed).
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 27))",
            &[&name],
        )
        .await
        .map_err(|e| self.pg_error(&doing, e))?;
        let row = tx
            .query_opt(
                "SELECT stamp, CASE WHEN stamp IS DISTINCT FROM $2 THEN body END
                 FROM documents WHERE name = $1 FOR UPDATE",
                &[&name, &known],
            )
            .await
            .map_err(|e| self.pg_error(&doing, e))?;
        let current = match &row {
            Some(r) => Some((
                r.try_get::<_, i64>(0)
                    .map_err(|e| self.pg_error(&doing, e))?,
                r.try_get::<_, Option<String>>(1)
                    .map_err(|e| self.pg_error(&doing, e))?,
            )),
            None => None,
        };
        let (body, queued, out) = f(current.as_ref().map(|(s, b)| (*s, b.as_deref())));
        let Some(body) = body else {
            // Nothing to write: the transaction only read.
            return Ok((out, None, 0));
        };
        let written = if current.is_some() {
            tx.query_opt(
                "UPDATE documents SET body = $2 WHERE name = $1 RETURNING stamp",
                &[&name, &body],
            )
            .await
        } else {
            tx.query_opt(
                "INSERT INTO documents (name, body) VALUES ($1, $2)
                 ON CONFLICT (name) DO NOTHING RETURNING stamp",
                &[&name, &body],
            )
            .await
        }
        .map_err(|e| self.pg_error(&doing, e))?;
        let Some(row) = written else {
            return Err(DriverError::Conflict {
                driver: DRIVER,
                message: format!(
                    "{}: document {name} was created by another writer while it was changed \
                     here; run the change again",
                    self.target
                ),
            });
        };
        let stamp: i64 = row.try_get(0).map_err(|e| self.pg_error(&doing, e))?;
        let mut n = 0;
        if let Some((prefix, max)) = queue {
            let max = i64::try_from(max).unwrap_or(i64::MAX);
            for entry in &queued {
                n += tx
                    .execute(
                        "INSERT INTO documents (name, body)
                         SELECT $1 || lpad(nextval('lcm_outbox_seq')::TEXT, 20, '0'), $2
                         WHERE (SELECT count(*) FROM documents
                                WHERE name >= $1 AND left(name, length($1)) = $1) < $3",
                        &[&prefix, entry, &max],
                    )
                    .await
                    .map_err(|e| self.pg_error(format!("{doing}: queueing in {prefix}*"), e))?;
            }
        }
        tx.commit().await.map_err(|e| self.pg_error(&doing, e))?;
        Ok((out, Some(stamp), usize::try_from(n).unwrap_or(usize::MAX)))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::super::cas::Expect;
    use super::super::tests::TestDb;
    use super::*;

    #[tokio::test]
    async fn locked_changes_from_two_stores_lose_none_and_stop_a_stale_compare_and_swap() {
        let Some(db) = TestDb::create("locked_doc").await else {
            return;
        };
        let mut tasks = Vec::new();
        for _ in 0..3 {
            let s = db.store().await;
            tasks.push(tokio::spawn(async move {
                // The first writers too take turns: none meets a conflict.
                for _ in 0..10 {
                    s.update_document_locked("n", None, |cur| {
                        let n = cur.map_or(0, |(_, b)| b.unwrap().parse::<u32>().unwrap());
                        (Some((n + 1).to_string()), ())
                    })
                    .await
                    .unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let s = db.store().await;
        let (n, stamp) = s.document_with_stamp("n").await.unwrap().unwrap();
        assert_eq!(n, "30");
        // A compare-and-swap on a stamp read before a locked change is refused.
        let (_, new) = s
            .update_document_locked("n", None, |_| (Some("x".to_owned()), ()))
            .await
            .unwrap();
        assert_ne!(new, Some(stamp));
        let e = s
            .write_document_if("n", "y", Expect::Stamp(stamp))
            .await
            .unwrap_err();
        assert!(matches!(e, DriverError::Conflict { .. }), "{e}");
        // The body is not read when the caller knows the stamp; nothing to write: nothing
        // written.
        let (v, none) = s
            .update_document_locked("n", new, |cur| {
                assert_eq!(cur, Some((new.unwrap(), None)));
                (None, 7)
            })
            .await
            .unwrap();
        assert_eq!((v, none), (7, None));
        assert_eq!(s.document("n").await.unwrap().as_deref(), Some("x"));
    }

    #[tokio::test]
    async fn queued_documents_are_written_with_the_change_numbered_in_order_and_bounded() {
        let Some(db) = TestDb::create("locked_queue").await else {
            return;
        };
        let s = db.store().await;
        let (_, stamp, n) = s
            .update_document_locked_queueing("doc", None, Some(("q:", 3)), |_| {
                (Some("1".to_owned()), vec!["a".into(), "b".into()], ())
            })
            .await
            .unwrap();
        assert!(stamp.is_some());
        assert_eq!(n, 2);
        // Nothing written, nothing queued.
        let (_, _, n) = s
            .update_document_locked_queueing("doc", None, Some(("q:", 3)), |_| {
                (None, vec!["lost".into()], ())
            })
            .await
            .unwrap();
        assert_eq!(n, 0);
        // Beyond the bound: not written.
        let (_, _, n) = s
            .update_document_locked_queueing("doc", None, Some(("q:", 3)), |_| {
                (Some("2".to_owned()), vec!["c".into(), "d".into()], ())
            })
            .await
            .unwrap();
        assert_eq!(n, 1);
        let q = s.documents_with_prefix("q:").await.unwrap();
        let bodies: Vec<&str> = q.iter().map(|(_, b)| b.as_str()).collect();
        assert_eq!(bodies, ["a", "b", "c"]);
        assert!(q.iter().all(|(n, _)| n.len() == "q:".len() + 20), "{q:?}");
        assert_eq!(s.document("doc").await.unwrap().as_deref(), Some("2"));
    }
}
