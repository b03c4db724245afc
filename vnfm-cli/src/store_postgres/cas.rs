//! Documents that several processes (replicas) share and each changes in its own memory: read
//! with their stamp ([`PgStore::document_with_stamp`]), written by compare-and-swap on it
//! ([`PgStore::write_document_if`]: a writer that lost the race reads again and tries again,
//! no transaction open while it decides), or changed under the document's lock
//! ([`PgStore::with_locked_document`]: one process at a time, the change made inside the
//! transaction; the alert state and the simulated cloud of `vnfm serve`'s replicas).

use vnfm_core::driver::DriverError;

use super::{PgStore, DRIVER};

/// What a document was when it was read, for [`PgStore::write_document_if`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// There was no such document.
    Absent,
    /// It had this stamp.
    Stamp(i64),
}

impl PgStore {
    /// The document stored under `name` and its change stamp (see
    /// [`PgStore::document_stamp`]), if there is one.
    ///
    /// # Errors
    /// As [`PgStore::document`].
    pub async fn document_with_stamp(
        &self,
        name: &str,
    ) -> Result<Option<(String, i64)>, DriverError> {
        let doing = format!("reading document {name}");
        let rows = self
            .rows(
                &doing,
                "SELECT body, stamp FROM documents WHERE name = $1",
                &[&name],
            )
            .await?;
        match rows.first() {
            Some(row) => {
                let body: String = row.try_get(0).map_err(|e| self.pg_error(&doing, e))?;
                let stamp: i64 = row.try_get(1).map_err(|e| self.pg_error(&doing, e))?;
                Ok(Some((body, stamp)))
            }
            None => Ok(None),
        }
    }

    /// Stores `body` under `name` if the document is still what `expect` says (absent, or at
    /// that stamp), in one statement; its new stamp.
    ///
    /// # Errors
    /// [`DriverError::Conflict`] when another process wrote (or created, or deleted) the
    /// document since it was read: nothing is written; read it again. Otherwise as
    /// [`PgStore::document`].
    pub async fn write_document_if(
        &self,
        name: &str,
        body: &str,
        expect: Expect,
    ) -> Result<i64, DriverError> {
        let doing = format!("writing document {name}");
        let rows = match expect {
            Expect::Absent => {
                self.rows(
                    &doing,
                    "INSERT INTO documents (name, body) VALUES ($1, $2)
                     ON CONFLICT (name) DO NOTHING RETURNING stamp",
                    &[&name, &body],
                )
                .await?
            }
            Expect::Stamp(stamp) => {
                self.rows(
                    &doing,
                    "UPDATE documents SET body = $2 WHERE name = $1 AND stamp = $3
                     RETURNING stamp",
                    &[&name, &body, &stamp],
                )
                .await?
            }
        };
        match rows.first() {
            Some(row) => row.try_get(0).map_err(|e| self.pg_error(&doing, e)),
            None => Err(DriverError::Conflict {
                driver: DRIVER,
                message: format!(
                    "{}: document {name} changed since it was read ({}): another writer got \
                     there first",
                    self.target,
                    match expect {
                        Expect::Absent => "it was absent".to_owned(),
                        Expect::Stamp(s) => format!("stamp {s} expected"),
                    }
                ),
            }),
        }
    }
}

impl PgStore {
    /// Runs `f` while holding the lock of document `name` (a transaction-level advisory lock
    /// keyed by the name: of the processes on the database, one at a time), for a document too
    /// large or too often changed for [`PgStore::write_document_if`]'s retries (the simulated
    /// cloud shared by replicas). `f` is given the document when its stamp is not `known` (the
    /// one the caller last saw: `None` for none), `None` when the caller's copy is current or
    /// there is no document; it returns its result and the body to store (`None`: unchanged).
    /// Returns the result and the document's stamp after (`None`: there is none).
    ///
    /// # Errors
    /// `f`'s error (nothing is written), or as [`PgStore::document`].
    pub async fn with_locked_document<T, F, Fut>(
        &self,
        name: &str,
        known: Option<i64>,
        f: F,
    ) -> Result<(T, Option<i64>), DriverError>
    where
        F: FnOnce(Option<String>) -> Fut + Send,
        Fut: std::future::Future<Output = Result<(T, Option<String>), DriverError>> + Send,
        T: Send,
    {
        let doing = format!("changing document {name} under its lock");
        let mut client = self.client(&doing).await?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| self.pg_error(&doing, e))?;
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 27))",
            &[&name],
        )
        .await
        .map_err(|e| self.pg_error(&doing, e))?;
        let row = tx
            .query_opt("SELECT stamp FROM documents WHERE name = $1", &[&name])
            .await
            .map_err(|e| self.pg_error(&doing, e))?;
        let stamp: Option<i64> = match row {
            Some(r) => Some(r.try_get(0).map_err(|e| self.pg_error(&doing, e))?),
            None => None,
        };
        let current = match stamp {
            Some(s) if Some(s) != known => {
                let row = tx
                    .query_one("SELECT body FROM documents WHERE name = $1", &[&name])
                    .await
                    .map_err(|e| self.pg_error(&doing, e))?;
                Some(
                    row.try_get::<_, String>(0)
                        .map_err(|e| self.pg_error(&doing, e))?,
                )
            }
            _ => None,
        };
        let (out, write) = f(current).await?;
        let after = match write {
            Some(body) => {
                let row = tx
                    .query_one(
                        "INSERT INTO documents (name, body) VALUES ($1, $2)
                         ON CONFLICT (name) DO UPDATE SET body = excluded.body
                         RETURNING stamp",
                        &[&name, &body],
                    )
                    .await
                    .map_err(|e| self.pg_error(&doing, e))?;
                Some(row.try_get(0).map_err(|e| self.pg_error(&doing, e))?)
            }
            None => stamp,
        };
        tx.commit().await.map_err(|e| self.pg_error(&doing, e))?;
        Ok((out, after))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::super::tests::TestDb;
    use super::*;

    #[tokio::test]
    async fn a_write_lands_only_on_the_stamp_it_read() {
        let Some(db) = TestDb::create("cas").await else {
            return;
        };
        let a = db.store().await;
        let b = db.store().await;
        assert_eq!(a.document_with_stamp("shared").await.unwrap(), None);
        // Both read "absent"; one creates it, the other is refused.
        let s1 = a
            .write_document_if("shared", "a1", Expect::Absent)
            .await
            .unwrap();
        let e = b
            .write_document_if("shared", "b1", Expect::Absent)
            .await
            .unwrap_err();
        assert!(matches!(e, DriverError::Conflict { .. }), "{e}");
        assert!(e.to_string().contains("document shared changed"), "{e}");
        // B reads it again and writes on the stamp it read; A's stale stamp is refused then.
        let (body, stamp) = b.document_with_stamp("shared").await.unwrap().unwrap();
        assert_eq!((body.as_str(), stamp), ("a1", s1));
        let s2 = b
            .write_document_if("shared", "b2", Expect::Stamp(s1))
            .await
            .unwrap();
        assert_ne!(s1, s2);
        let e = a
            .write_document_if("shared", "a2", Expect::Stamp(s1))
            .await
            .unwrap_err();
        assert!(
            e.to_string().contains(&format!("stamp {s1} expected")),
            "{e}"
        );
        assert_eq!(
            a.document_with_stamp("shared").await.unwrap(),
            Some(("b2".to_owned(), s2))
        );
        // Any other write moves the stamp too.
        a.put_document("shared", "c".to_owned()).await.unwrap();
        let e = b
            .write_document_if("shared", "b3", Expect::Stamp(s2))
            .await
            .unwrap_err();
        assert!(matches!(e, DriverError::Conflict { .. }), "{e}");
    }

    #[tokio::test]
    async fn concurrent_increments_by_compare_and_swap_lose_none() {
        let Some(db) = TestDb::create("cas_race").await else {
            return;
        };
        let mut tasks = Vec::new();
        for _ in 0..4 {
            let s = db.store().await;
            tasks.push(tokio::spawn(async move {
                for _ in 0..10 {
                    loop {
                        let read = s.document_with_stamp("n").await.unwrap();
                        let (n, expect) = match read {
                            Some((b, st)) => (b.parse::<u32>().unwrap(), Expect::Stamp(st)),
                            None => (0, Expect::Absent),
                        };
                        match s.write_document_if("n", &(n + 1).to_string(), expect).await {
                            Ok(_) => break,
                            Err(DriverError::Conflict { .. }) => continue,
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let (n, _) = db
            .store()
            .await
            .document_with_stamp("n")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(n, "40");
    }

    #[tokio::test]
    async fn changes_under_the_lock_are_one_at_a_time_and_see_the_last() {
        let Some(db) = TestDb::create("locked").await else {
            return;
        };
        let mut tasks = Vec::new();
        for _ in 0..3 {
            let s = db.store().await;
            tasks.push(tokio::spawn(async move {
                // Each keeps its own copy and its stamp, as a replica keeps its simulator.
                let mut mine = 0u32;
                let mut known = None;
                for _ in 0..10 {
                    let (n, stamp) = s
                        .with_locked_document("n", known, |current| async move {
                            let n = current.map_or(mine, |b| b.parse::<u32>().unwrap()) + 1;
                            // Time for another process to come in, were it not locked out.
                            tokio::task::yield_now().await;
                            Ok((n, Some(n.to_string())))
                        })
                        .await
                        .unwrap();
                    mine = n;
                    known = stamp;
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let s = db.store().await;
        assert_eq!(s.document("n").await.unwrap().as_deref(), Some("30"));
        // Unchanged: nothing written, the stamp stays; a known stamp gives no body.
        let stamp = s.document_stamp("n").await.unwrap();
        let (seen, after) = s
            .with_locked_document("n", stamp, |current| async move { Ok((current, None)) })
            .await
            .unwrap();
        assert_eq!((seen, after), (None, stamp));
        let e = s
            .with_locked_document("n", None, |_| async move {
                Err::<((), Option<String>), _>(DriverError::Other {
                    driver: "test",
                    message: "refused".into(),
                    source: None,
                })
            })
            .await
            .unwrap_err();
        assert!(e.to_string().contains("refused"), "{e}");
        assert_eq!(s.document("n").await.unwrap().as_deref(), Some("30"));
    }
}
