//! Shared by the tests that run on PostgreSQL (`serve_postgres`, `serve_pg_notifications`,
//! `replicas`, `serve_list_scale`, `state_postgres`): the server of `VNFM_TEST_POSTGRES_URL`
//! (a skip of the suite `postgres` without it), a database of one test on it, plain clients.
//! `vnfm-cli/src/store_postgres.rs`'s unit tests have their own (`store_postgres::tests::TestDb`,
//! dropped on drop).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicU32, Ordering};

use tokio_postgres::NoTls;

/// The server the tests create their databases on.
pub const URL_VAR: &str = "VNFM_TEST_POSTGRES_URL";

/// The test file (the test crate's name: `serve_postgres`, ...), which skips are named after.
fn test_file() -> &'static str {
    let path = module_path!();
    path.split("::").next().unwrap_or(path)
}

/// The server of [`URL_VAR`], or `None` after recording a skip of `test` (suite `postgres`,
/// named `FILE: test`).
pub fn admin_url(test: &str) -> Option<String> {
    let url = std::env::var(URL_VAR).ok().filter(|u| !u.trim().is_empty());
    if url.is_none() {
        vnfm_core::vectors::skip(
            "postgres",
            &format!("{}: {test}", test_file()),
            "VNFM_TEST_POSTGRES_URL is not set (scripts/test.sh starts a server when CI or \
             VNFM_TEST_POSTGRES=1 is set, or: eval \"$(scripts/postgres-dev.sh start DIR)\")",
        );
    }
    url
}

/// `url` with its database replaced by `db` (URL form only).
pub fn with_database(url: &str, db: &str) -> String {
    let rest = url.find("://").map_or(0, |i| i + 3);
    let query = url[rest..].find('?').map_or(url.len(), |i| rest + i);
    let path = url[rest..query].find('/').map_or(query, |i| rest + i);
    format!("{}/{db}{}", &url[..path], &url[query..])
}

/// A plain connection to `url` (its task spawned on the test's runtime).
pub async fn client(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, NoTls).await.unwrap();
    tokio::spawn(conn);
    client
}

/// A database of one test, created from `template0`, dropped by [`TestDb::drop_now`] (left to
/// the throw-away cluster when a test fails).
pub struct TestDb {
    /// The server's URL (its own database).
    pub admin: String,
    /// The database's name: `t_PID_SEQ_TEST` (`TEST` cut to 30 characters).
    pub name: String,
    /// The URL of the database.
    pub url: String,
}

impl TestDb {
    /// A database of `test` on the server of [`URL_VAR`]; `None` after recording a skip.
    pub async fn create(test: &str) -> Option<TestDb> {
        let admin = admin_url(test)?;
        Some(TestDb::create_on(&admin, test).await)
    }

    /// A database of `test` on the server of `admin`.
    pub async fn create_on(admin: &str, test: &str) -> TestDb {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "t_{}_{}_{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed),
            test.chars().take(30).collect::<String>()
        );
        client(admin)
            .await
            .batch_execute(&format!("CREATE DATABASE \"{name}\" TEMPLATE template0"))
            .await
            .unwrap();
        let url = with_database(admin, &name);
        TestDb {
            admin: admin.to_owned(),
            name,
            url,
        }
    }

    /// Runs `sql` (statements) on the database.
    pub async fn execute(&self, sql: &str) {
        client(&self.url).await.batch_execute(sql).await.unwrap();
    }

    /// `SELECT count(*)` of `sql`'s rows.
    pub async fn count(&self, sql: &str) -> i64 {
        client(&self.url)
            .await
            .query_one(sql, &[])
            .await
            .unwrap()
            .get(0)
    }

    /// Drops the database (its connections closed).
    pub async fn drop_now(self) {
        client(&self.admin)
            .await
            .batch_execute(&format!(
                "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
                self.name
            ))
            .await
            .unwrap();
    }
}
