//! Every environment variable the workspace reads: the one list
//! `docs/configuration.md` is generated from (`tests/it/docs.rs` compares
//! the page with it, and checks that the code reads every variable listed
//! and that the list names every variable the code reads). A new variable
//! is a row of the list of its subject, a module below; `UPDATE_DOCS=1 cargo
//! test --workspace --exclude sim --locked --test it -- docs` then rewrites
//! the page (see CONTRIBUTING.md).
//!
//! Data only: names, defaults and meanings in Markdown, relative links from
//! `docs/`. A meaning may be wrapped over several lines: the page joins
//! every run of white space into one space.

mod accounts;
mod cache;
mod models;
mod objects_and_jobs;
mod observability;
mod provider;
mod redis;
mod row;
mod serving;
mod stripe;
mod tooling;

pub use row::{Scope, Variable};

/// The subjects' lists, in the page's order.
const SUBJECTS: [&[Variable]; 10] = [
    provider::VARIABLES,
    serving::VARIABLES,
    objects_and_jobs::VARIABLES,
    accounts::VARIABLES,
    models::VARIABLES,
    redis::VARIABLES,
    stripe::VARIABLES,
    observability::VARIABLES,
    cache::VARIABLES,
    tooling::VARIABLES,
];

/// Every variable, in the page's order.
pub const VARIABLES: &[Variable] = &joined::<{ count() }>();

/// How many variables the subjects list.
const fn count() -> usize {
    let (mut n, mut s) = (0, 0);
    while s < SUBJECTS.len() {
        n += SUBJECTS[s].len();
        s += 1;
    }
    n
}

/// The subjects' lists one after the other.
const fn joined<const N: usize>() -> [Variable; N] {
    let mut all = [SUBJECTS[0][0]; N];
    let (mut n, mut s) = (0, 0);
    while s < SUBJECTS.len() {
        let mut i = 0;
        while i < SUBJECTS[s].len() {
            all[n] = SUBJECTS[s][i];
            (n, i) = (n + 1, i + 1);
        }
        s += 1;
    }
    all
}
