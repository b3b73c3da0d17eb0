//! The two databases behind the store: SQLite (the embedded default) and
//! PostgreSQL (`GATEWAY_DATABASE_URL`). The rest of the suite runs on
//! either (`GATEWAY_TEST_DATABASE_URL`); this checks what only makes sense
//! with both at hand.

use runtime::store::{Accounts, Instances, Location, Store};

use crate::harness::*;

#[test]
fn both_databases_have_the_same_tables_and_columns() {
    let Some(_) = require_postgres("schema parity") else {
        return;
    };
    let lite_dir = TempDir::new("schema-lite");
    let lite = Store::open_at(&Location::Sqlite(lite_dir.0.join("gateway.db"))).unwrap();
    let pg_dir = TempDir::new("schema-pg");
    let pg = Store::open_at(&Location::Postgres(pg_dir.database_url().unwrap())).unwrap();
    let (lite_cols, pg_cols) = (lite.schema_columns().unwrap(), pg.schema_columns().unwrap());
    // SQLite's implicit row id is a column of its own on PostgreSQL.
    let pg_cols: Vec<_> = pg_cols
        .into_iter()
        .filter(|(t, c)| !(t == "video_jobs" && c == "rowid"))
        .collect();
    assert!(lite_cols.len() > 100, "{lite_cols:?}");
    assert_eq!(lite_cols, pg_cols);
}

#[test]
fn a_bad_database_url_stops_the_gateway_naming_the_variable() {
    let dir = TempDir::new("bad-url");
    for (url, says) in [
        ("mysql://localhost/db", "postgres://"),
        ("postgres://localhost:notaport/db", "GATEWAY_DATABASE_URL"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gateway"))
            .env_clear()
            .env("GATEWAY_DATA_DIR", &dir.0)
            .env("GATEWAY_DATABASE_URL", url)
            .args(["users", "create", "--email", "a@example.com"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            err.contains("GATEWAY_DATABASE_URL") && err.contains(says),
            "{err}"
        );
    }
    assert!(
        !dir.0.join("gateway.db").exists(),
        "no SQLite file made instead"
    );
}

#[test]
fn instances_migrating_one_postgres_database_at_once_all_succeed() {
    let Some(_) = require_postgres("concurrent migrations") else {
        return;
    };
    let dir = TempDir::new("pg-race");
    let url = dir.database_url().unwrap();
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let url = url.clone();
            std::thread::spawn(move || {
                let store = Store::open_at(&Location::Postgres(url)).unwrap();
                store
                    .create_user(&format!("u{i}@example.com"), false)
                    .unwrap()
            })
        })
        .collect();
    let mut ids: Vec<i64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 4);
}

#[test]
fn scheduled_work_is_claimed_once_per_database() {
    let mut stores = vec![];
    let lite_dir = TempDir::new("claims-lite");
    stores.push(Store::open_at(&Location::Sqlite(lite_dir.0.join("gateway.db"))).unwrap());
    let pg_dir = TempDir::new("claims-pg");
    if let Some(url) = pg_dir.database_url() {
        // Two instances on one PostgreSQL database: one claim between them.
        let a = Store::open_at(&Location::Postgres(url.clone())).unwrap();
        let b = Store::open_at(&Location::Postgres(url)).unwrap();
        assert!(a.claim_once("reconcile:2026-11-22").unwrap());
        assert!(!b.claim_once("reconcile:2026-11-22").unwrap());
        assert!(b.claim_once("reconcile:2026-11-23").unwrap());
    }
    for s in stores {
        assert!(s.claim_once("reconcile:2026-11-22").unwrap());
        assert!(!s.claim_once("reconcile:2026-11-22").unwrap());
    }
}
