//! Documents changed by compare-and-swap on their stamp: what several replicas share and each
//! changes in memory (the alert state, the Promise ledger) is read with its stamp
//! ([`PgStore::document_with_stamp`]) and written only if no one wrote it since
//! ([`PgStore::write_document_if`]); a replica that lost the race reads it again, applies its
//! change to what it read, and tries again. No transaction stays open while a replica decides.

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
}
